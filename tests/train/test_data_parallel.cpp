// Data parallelism's arithmetic and overlap, without MPI: a stand-in communicator of two ranks whose other
// rank holds the same gradients as this one. The MPI runs themselves are tests/mpi.
#include <catch2/catch.hpp>
#include <cstring>

#include "autograd/autograd.h"
#include "nn/classifier.h"
#include "train/parallel/data_parallel.h"

using namespace tapegrad;

namespace {

/// Rank 0 of two, the other rank a mirror of this one. Records, at each sum it starts, whether `watched`
/// had its gradient yet: a sum started before backward reached it is one that overlaps backward.
class MirroredRanks final : public Communicator {
 public:
  Tensor watched;
  std::vector<bool> watched_had_grad;

  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string host() const override { return "here"; }
  int default_threads() const override { return 1; }
  std::vector<std::string> allgather(const std::string& mine) override { return {mine, mine}; }
  void broadcast(std::span<std::byte>) override {}
  std::unique_ptr<PendingCollective> start_sum(std::span<float> data) override {
    watched_had_grad.push_back(watched.grad().defined());
    for (float& v : data) v += v;
    return std::make_unique<Complete>();
  }
  std::unique_ptr<PendingCollective> start_gather(std::span<const float> mine, std::span<float> all) override {
    watched_had_grad.push_back(watched.grad().defined());
    std::copy(mine.begin(), mine.end(), all.begin());
    std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(mine.size()));
    return std::make_unique<Complete>();
  }
  [[noreturn]] void abort(int code) override { std::exit(code); }

 private:
  struct Complete final : PendingCollective {
    bool test() override { return true; }
    void wait() override {}
  };
};

/// The smallest classifier (nn::micro_classifier) and a batch of two sequences for it, the second padded.
struct Step {
  Generator init;
  nn::SequenceClassifier model;
  nn::NamedTensors params = model.named_parameters();
  Tensor ids = tapegrad::ids({1, 4, 5, 2, 6, 3, 3, 3, 2, 1, 0, 0}, {2, 6});
  Tensor mask = tapegrad::mask({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 6});  // <pad> = 0
  Tensor targets = tapegrad::ids({2, 0}, {2});

  explicit Step(uint64_t seed) : init(seed), model(nn::micro_classifier(), init, std::make_shared<Generator>(0)) {}
  Tensor loss() { return cross_entropy(model.forward(ids, mask), targets); }
  void zero_grad() {
    for (const auto& [name, p] : params) p.zero_grad();
  }
};

std::vector<std::vector<double>> gradients(const nn::NamedTensors& params) {
  std::vector<std::vector<double>> grads;
  for (const auto& [name, p] : params)
    grads.push_back(p.grad().defined() ? p.grad().to_vector() : std::vector<double>{});
  return grads;
}

}  // namespace

TEST_CASE("data parallel: shares of a batch are consecutive, differ by at most one, and cover it") {
  for (int64_t n : {0, 1, 5, 64, 127})
    for (int ranks : {1, 2, 3, 4}) {
      int64_t next = 0;
      for (int r = 0; r < ranks; ++r) {
        const auto [begin, end] = share_of(n, r, ranks);
        CHECK(begin == next);
        CHECK((end - begin == n / ranks || end - begin == n / ranks + 1));
        next = end;
      }
      CHECK(next == n);
    }
}

TEST_CASE("data parallel: the averaged gradients are one process's, and buckets are summed while backward runs") {
  Step step(3);
  backward(step.loss());
  const auto alone = gradients(step.params);

  for (const bool exact : {false, true}) {
    for (const bool overlap : {true, false}) {
      INFO("exact " << exact << ", overlap " << overlap);
      MirroredRanks ranks;
      ranks.watched = step.params.front().second;  // the token embedding: read first, so complete last
      GradientAverager averager(ranks, step.params, DataParallelOptions{overlap, exact, 0.0001});
      step.zero_grad();
      averager.backward(step.loss(), 2, 4);  // both ranks hold 2 of the batch's 4 examples: weight 1
      std::array<double, 1> sums = {1.5};
      averager.finish(sums);
      CHECK(sums[0] == 3.0);  // summed over the two ranks
      // (g + g) / 2 and the double sum of g and g, halved, are both g again, bit for bit.
      CHECK(gradients(step.params) == alone);
      REQUIRE(!ranks.watched_had_grad.empty());
      if (overlap) {
        CHECK(averager.buckets() > 3);
        CHECK_FALSE(ranks.watched_had_grad.front());  // the first sum started before backward was done
      } else {
        CHECK(averager.buckets() == 1);
        CHECK(ranks.watched_had_grad.front());
      }
    }
  }
}

TEST_CASE("data parallel: an uneven share is weighted by its examples, and a rank with none adds zeros") {
  Step step(5);
  backward(step.loss());
  const auto alone = gradients(step.params);
  MirroredRanks ranks;
  ranks.watched = step.params.front().second;
  GradientAverager averager(ranks, step.params, DataParallelOptions{});
  step.zero_grad();
  // This rank holds 2 of the batch's 8 examples (weight 2 * 2 / 8 = 1/2), and so does its mirror: the
  // average is a quarter of the whole batch's mean loss, i.e. g / 2.
  averager.backward(step.loss(), 2, 8);
  std::array<double, 0> none{};
  averager.finish(none);
  const auto halved = gradients(step.params);
  for (size_t i = 0; i < alone.size(); ++i)
    for (size_t k = 0; k < alone[i].size(); ++k) CHECK(halved[i][k] == alone[i][k] / 2);

  // A rank with no examples this step runs no backward: its zeros leave the others' sum alone, and a
  // parameter no rank has a gradient for keeps none.
  step.zero_grad();
  averager.finish(none);
  for (const auto& [name, p] : step.params) CHECK_FALSE(p.grad().defined());
}

TEST_CASE("data parallel: parameters that are not float32 are refused by name") {
  Tensor w = zeros({3}, DType::float64);
  w.requires_grad_();
  MirroredRanks ranks;
  CHECK_THROWS_WITH(GradientAverager(ranks, {{"w", w}}, DataParallelOptions{}),
                    Catch::Contains("parameter 'w' is float64"));
}
