// make_batch: padding to the longest sequence, the key padding mask, <cls>, truncation and its count,
// empty texts, and the errors.
#include <catch2/catch.hpp>

#include "autograd/error.h"
#include "train/data/batching.h"

using namespace tapegrad;

namespace {

const std::vector<std::string> kLabels = {"neg", "pos"};

Vocab test_vocab() { return Vocab::build({"a b c d e f"}); }  // a = 3 ... f = 8

}  // namespace

TEST_CASE("train: make_batch pads to the longest sequence and masks the padding") {
  const std::vector<Example> examples = {{"pos", "a b c"}, {"neg", "d"}, {"pos", "e zz"}};
  const Batch batch = make_batch(examples, test_vocab(), kLabels, 16, false);
  REQUIRE(batch.ids.shape() == Shape{3, 3});
  REQUIRE(batch.ids.dtype() == DType::int64);
  REQUIRE(batch.key_padding_mask.shape() == Shape{3, 3});
  REQUIRE(batch.key_padding_mask.dtype() == DType::boolean);
  REQUIRE(batch.targets.shape() == Shape{3});
  REQUIRE(batch.targets.dtype() == DType::int64);
  CHECK(batch.ids.to_int_vector() == std::vector<int64_t>{3, 4, 5, 6, 0, 0, 7, Vocab::kUnk, 0});
  CHECK(batch.key_padding_mask.to_int_vector() == std::vector<int64_t>{0, 0, 0, 0, 1, 1, 0, 0, 1});
  CHECK(batch.targets.to_int_vector() == std::vector<int64_t>{1, 0, 1});
  CHECK(batch.truncated == 0);
}

TEST_CASE("train: make_batch prepends <cls> within the context length and counts truncations") {
  const std::vector<Example> examples = {{"pos", "a b c d e"}, {"neg", "f"}, {"neg", "a b c"}};
  const Batch with_cls = make_batch(examples, test_vocab(), kLabels, 4, true);
  REQUIRE(with_cls.ids.shape() == Shape{3, 4});
  CHECK(with_cls.ids.to_int_vector() == std::vector<int64_t>{2, 3, 4, 5, 2, 8, 0, 0, 2, 3, 4, 5});
  CHECK(with_cls.key_padding_mask.to_int_vector() == std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0});
  CHECK(with_cls.truncated == 1);  // "a b c" + <cls> is exactly 4: not cut

  const Batch cut = make_batch(examples, test_vocab(), kLabels, 2, false);
  REQUIRE(cut.ids.shape() == Shape{3, 2});
  CHECK(cut.ids.to_int_vector() == std::vector<int64_t>{3, 4, 8, 0, 3, 4});
  CHECK(cut.truncated == 2);

  // T is the longest sequence after truncation, not the context length.
  CHECK(make_batch({{"pos", "a"}}, test_vocab(), kLabels, 100, true).ids.shape() == Shape{1, 2});
}

TEST_CASE("train: an empty text becomes one <unk>, so no row is all padding") {
  const std::vector<Example> examples = {{"pos", ""}, {"neg", "  \t "}, {"pos", "a b"}};
  const Batch plain = make_batch(examples, test_vocab(), kLabels, 8, false);
  CHECK(plain.ids.to_int_vector() == std::vector<int64_t>{1, 0, 1, 0, 3, 4});
  CHECK(plain.key_padding_mask.to_int_vector() == std::vector<int64_t>{0, 1, 0, 1, 0, 0});
  const Batch cls = make_batch(examples, test_vocab(), kLabels, 8, true);
  CHECK(cls.ids.to_int_vector() == std::vector<int64_t>{2, 1, 0, 2, 1, 0, 2, 3, 4});
}

TEST_CASE("train: the mask is positional: a word spelled <pad> is not masked") {
  const Batch batch = make_batch({{"pos", "<pad> a"}, {"neg", "a"}}, test_vocab(), kLabels, 8, false);
  CHECK(batch.ids.to_int_vector() == std::vector<int64_t>{0, 3, 3, 0});
  CHECK(batch.key_padding_mask.to_int_vector() == std::vector<int64_t>{0, 0, 0, 1});
}

TEST_CASE("train: make_batch rejects unknown labels, empty batches and too short contexts") {
  try {
    make_batch({{"pos", "a"}, {"maybe", "b"}}, test_vocab(), kLabels, 8, false);
    FAIL("no error");
  } catch (const ValueError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("'maybe'"));
  }
  CHECK_THROWS_AS(make_batch({}, test_vocab(), kLabels, 8, false), ValueError);
  CHECK_THROWS_AS(make_batch({{"pos", "a"}}, test_vocab(), kLabels, 0, false), ValueError);
  CHECK_THROWS_AS(make_batch({{"pos", "a"}}, test_vocab(), kLabels, 1, true), ValueError);
  CHECK(make_batch({{"pos", "a b"}}, test_vocab(), kLabels, 1, false).truncated == 1);
}
