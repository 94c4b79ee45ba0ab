// metrics.csv: training-only rows with empty validation cells round-trip as NaN, and malformed rows are
// refused with the file and line.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <limits>

#include "autograd/error.h"
#include "support/temp_dir.h"
#include "train/report/metrics.h"

using namespace tapegrad;
using testing::TempDir;

TEST_CASE("train: metrics.csv writes training-only rows with empty validation cells and reads them back") {
  TempDir dir("tapegrad_test_metrics");
  const std::string path = dir / "metrics.csv";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<MetricsRow> rows = {{10, 0, 5e-3, 1.25, nan, nan, 80.5, 0.125},
                                        {20, 1, 5e-3, 0.75, 0.5, 0.875, 90.25, 0.25}};
  write_metrics_csv(path, rows);
  std::ifstream in(path);
  std::string header, first;
  std::getline(in, header);
  std::getline(in, first);
  CHECK(header == kMetricsHeader);
  CHECK(first == "10,0,0.0050000000000000001,1.25,,,80.5,0.125");
  const std::vector<MetricsRow> back = read_metrics_csv(path);
  REQUIRE(back.size() == 2);
  CHECK(back[0].step == 10);
  CHECK(back[0].train_loss == 1.25);
  CHECK(std::isnan(back[0].valid_loss));
  CHECK(std::isnan(back[0].valid_accuracy));
  CHECK(back[0].steps_per_second == 80.5);
  CHECK(back[1].epoch == 1);
  CHECK(back[1].valid_loss == 0.5);
  CHECK(back[1].valid_accuracy == 0.875);

  for (const char* bad : {"10,0,0.005,,0.5,0.5,80,1",     // only the validation cells may be empty
                          "10,0,0.005,1.5,,,80",          // seven cells
                          "10,0,0.005,1.5,,,80,1,",       // nine
                          "10.5,0,0.005,1.5,,,80,1",      // a fractional step
                          "10,0,0.005,1.5x,,,80,1"}) {    // not a number
    INFO(bad);
    std::ofstream(path) << kMetricsHeader << "\n" << bad << "\n";
    CHECK_THROWS_WITH(read_metrics_csv(path), Catch::Contains("metrics.csv:2"));
  }
}
