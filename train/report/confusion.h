#pragma once
// The confusion matrix of an evaluation: how many examples of true class t were predicted as class p.
//
// Kept sparse, as a map of the (t, p) pairs that occur: memory grows with the distinct pairs seen (at most
// one per example), never with K², so 65 536 classes cost what 2 do (a dense K x K table of int64 would be
// 34 GB). The dense table is still there for the few classes where it reads well: eval prints it for up
// to kConfusionTableClasses classes and puts it in --json for up to kConfusionDenseClasses; past that,
// eval prints a bounded summary (the most frequent confusions) and --json lists the nonzero cells.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tapegrad {

/// Up to this many classes, eval prints the whole K x K table (16 columns fit a wide terminal).
inline constexpr int64_t kConfusionTableClasses = 16;
/// Up to this many classes, eval --json also gives the dense K x K "confusion" array (64 Ki numbers).
inline constexpr int64_t kConfusionDenseClasses = 256;
/// How many of the most frequent confusions the summary for more than kConfusionTableClasses lists.
inline constexpr int64_t kConfusionSummaryRows = 20;

class Confusion {
 public:
  explicit Confusion(int64_t classes = 0);

  /// Counts one example of class `truth` predicted as `predicted` (ValueError outside [0, K)).
  void add(int64_t truth, int64_t predicted);
  int64_t classes() const { return classes_; }
  /// The count of (truth, predicted); 0 for a pair never seen.
  int64_t at(int64_t truth, int64_t predicted) const;
  /// The nonzero cells, ordered by (truth, predicted).
  const std::map<std::pair<int64_t, int64_t>, int64_t>& cells() const { return cells_; }
  /// The K x K table [truth][predicted]; ValueError for more than kConfusionDenseClasses classes.
  std::vector<std::vector<int64_t>> dense() const;

  bool operator==(const Confusion&) const = default;

 private:
  int64_t classes_ = 0;
  std::map<std::pair<int64_t, int64_t>, int64_t> cells_;
};

/// The confusion matrix as eval prints it, lines ending in '\n'. Up to kConfusionTableClasses classes, the
/// table, with every label whole: columns widen to the longest label (counted in code points), so no two
/// labels read the same and no UTF-8 character is split (a fixed width once cut sentiment_positive and
/// sentiment_negative to one "sentimen"):
///   confusion matrix (rows: true label, columns: predicted)
///                     neg      pos
///            neg       20        1
///            pos        2       17
/// Past that, a summary of at most kConfusionSummaryRows + 2 lines: the counts, then the most frequent
/// (true, predicted) pairs with true != predicted, by count then class numbers, each with both labels.
/// labels.size() == K.
std::string confusion_text(const Confusion& confusion, const std::vector<std::string>& labels);

}  // namespace tapegrad
