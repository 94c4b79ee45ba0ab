// safetensors: round trips of every dtype (0-d and empty tensors included), a file built byte by byte
// from the format description, and corrupted files that must each be an IOError, never a crash.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "autograd/error.h"
#include "support/temp_dir.h"
#include "autograd/ops/views.h"
#include "autograd/random.h"
#include "train/checkpoint/safetensors.h"

using namespace tapegrad;
using testing::TempDir;
namespace fs = std::filesystem;

namespace {


using Bytes = std::string;

Bytes u64_le(uint64_t v) {
  Bytes out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

/// A safetensors file from its parts: the header length (the true one unless given), header, buffer.
Bytes file_bytes(const std::string& header, const Bytes& buffer) { return u64_le(header.size()) + header + buffer; }

void write_file(const std::string& path, const Bytes& bytes) {
  // Remove, then create: ext4 flushes a file rewritten through truncation when it is closed
  // (auto_da_alloc), which costs milliseconds per file in the loops below.
  std::error_code ec;
  fs::remove(path, ec);
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

Bytes read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// True when both tensors have the same dtype, shape and bytes.
bool identical(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || !(a.shape() == b.shape())) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  const size_t n = static_cast<size_t>(ca.numel()) * itemsize(ca.dtype());
  if (n == 0) return true;
  const char* pa = static_cast<const char*>(ca.data_ptr());
  const char* pb = static_cast<const char*>(cb.data_ptr());
  return std::memcmp(pa, pb, n) == 0;
}

std::string error_of(const std::string& path) {
  try {
    load_safetensors(path);
  } catch (const IOError& e) {
    return e.what();
  }
  return "no error";
}

// A valid two-tensor header used as the base of several corruptions: x is F32 [2] at [0, 8).
const std::string kEntryX = R"("x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
const Bytes kEightBytes(8, '\0');

}  // namespace

TEST_CASE("train: safetensors round trip of every dtype, a 0-d and an empty tensor") {
  TempDir dir("tapegrad_test_safetensors");
  Generator gen(3);
  const Tensor f32 = randn({2, 3}, gen);
  const Tensor f64 = randn({4}, gen, DType::float64);
  const Tensor i64 = ids({0, -1, INT64_MAX, INT64_MIN, 42, 7}, {3, 2});
  const Tensor flags = mask({1, 0, 0, 1, 1}, {5});
  const Tensor scalar = tensor({2.5}, Shape{});
  const Tensor nothing = zeros({0, 3});
  const Tensor transposed = transpose(randn({3, 4}, gen, DType::float64), 0, 1);  // not contiguous
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"layer.weight", f32}, {"f64", f64},       {"ids", i64},     {"mask", flags},
      {"scalar", scalar},    {"empty", nothing}, {"t", transposed}};
  const std::map<std::string, std::string> metadata = {{"format", "tapegrad"}, {"step", "120"}, {"note", "ünï"}};
  const std::string path = dir / "model.safetensors";
  save_safetensors(path, tensors, metadata);
  CHECK_FALSE(fs::exists(path + ".tmp"));

  const SafetensorsFile file = load_safetensors(path);
  REQUIRE(file.tensors.size() == tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    INFO(tensors[i].first);
    CHECK(file.tensors[i].first == tensors[i].first);
    CHECK(identical(file.tensors[i].second, tensors[i].second));
  }
  CHECK(file.metadata == metadata);
  CHECK(file.at("scalar").dim() == 0);
  CHECK(file.at("scalar").item() == 2.5);
  CHECK(file.at("empty").shape() == Shape{0, 3});
  CHECK(file.contains("mask"));
  CHECK_FALSE(file.contains("nope"));
  CHECK_THROWS_AS(file.at("nope"), ValueError);

  // The header is padded with spaces to a multiple of 8, so the buffer starts aligned.
  const Bytes bytes = read_file(path);
  uint64_t N = 0;
  for (int i = 0; i < 8; ++i) N |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  CHECK(N % 8 == 0);
  CHECK(bytes[8] == '{');

  // Saving again replaces the file whole; no tensors at all is a valid file too.
  save_safetensors(path, {{"only", scalar}});
  CHECK(load_safetensors(path).tensors.size() == 1);
  save_safetensors(path, {});
  CHECK(load_safetensors(path).tensors.empty());
}

TEST_CASE("train: save_safetensors rejects bad names and unwritable paths") {
  TempDir dir("tapegrad_test_safetensors");
  const Tensor t = ones({2});
  CHECK_THROWS_AS(save_safetensors(dir / "a.safetensors", {{"w", t}, {"w", t}}), ValueError);
  CHECK_THROWS_AS(save_safetensors(dir / "a.safetensors", {{"__metadata__", t}}), ValueError);
  CHECK_THROWS_AS(save_safetensors(dir / "a.safetensors", {{"", t}}), ValueError);
  CHECK_THROWS_AS(save_safetensors(dir / "a.safetensors", {{"u", Tensor()}}), ValueError);
  CHECK_THROWS_AS(save_safetensors(dir / "a.safetensors", {{"bad\xff", t}}), ValueError);
  CHECK_FALSE(fs::exists(dir / "a.safetensors"));
  CHECK_THROWS_AS(save_safetensors(dir / "missing_dir/a.safetensors", {{"w", t}}), IOError);
  // A failed save leaves the previous file and no temporary.
  const std::string path = dir / "keep.safetensors";
  save_safetensors(path, {{"w", t}});
  fs::create_directory(path + ".tmp");  // makes creating the temporary fail
  CHECK_THROWS_AS(save_safetensors(path, {{"w", zeros({3})}}), IOError);
  fs::remove(path + ".tmp");
  CHECK(identical(load_safetensors(path).at("w"), t));
}

TEST_CASE("train: a safetensors file built byte by byte from the format is read correctly") {
  TempDir dir("tapegrad_test_safetensors");
  // Buffer layout (offsets relative to the buffer): b I64 [2] at [0, 16), a F32 [3] at [16, 28),
  // c F64 [] at [28, 36), m BOOL [1, 3] at [36, 39), e F32 [0] at [39, 39). The header lists them out of
  // buffer order, has metadata in the middle, and ends in padding spaces.
  const std::string header = R"({"b":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
                             R"("__metadata__":{"format":"pt","epoch":"3"},)"
                             R"("m":{"data_offsets":[36,39],"shape":[1,3],"dtype":"BOOL"},)"
                             R"("a":{"dtype":"F32","shape":[3],"data_offsets":[16,28]},)"
                             R"("e":{"dtype":"F32","shape":[0],"data_offsets":[39,39]},)"
                             R"("c":{"dtype":"F64","shape":[],"data_offsets":[28,36]}}   )";
  // clang-format off
  const unsigned char buffer[] = {
      0x07, 0, 0, 0, 0, 0, 0, 0,                       // b[0] = 7
      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,  // b[1] = -1
      0x00, 0x00, 0x80, 0x3f,                          // a[0] = 1.0f
      0x00, 0x00, 0x00, 0xbf,                          // a[1] = -0.5f
      0x00, 0x00, 0x20, 0x41,                          // a[2] = 10.0f
      0x18, 0x2d, 0x44, 0x54, 0xfb, 0x21, 0x09, 0x40,  // c = pi as a double
      0x01, 0x00, 0x01,                                // m = [[true, false, true]]
  };
  // clang-format on
  const std::string path = dir / "hand.safetensors";
  write_file(path, file_bytes(header, Bytes(reinterpret_cast<const char*>(buffer), sizeof buffer)));

  const SafetensorsFile file = load_safetensors(path);
  REQUIRE(file.tensors.size() == 5);
  CHECK(file.tensors[0].first == "b");
  CHECK(file.tensors[1].first == "m");
  CHECK(file.tensors[2].first == "a");
  CHECK(file.tensors[3].first == "e");
  CHECK(file.tensors[4].first == "c");
  CHECK(file.metadata == std::map<std::string, std::string>{{"format", "pt"}, {"epoch", "3"}});

  const Tensor& b = file.at("b");
  REQUIRE(b.dtype() == DType::int64);
  CHECK(b.shape() == Shape{2});
  CHECK(b.data<int64_t>()[0] == 7);
  CHECK(b.data<int64_t>()[1] == -1);
  const Tensor& a = file.at("a");
  REQUIRE(a.dtype() == DType::float32);
  CHECK(a.to_vector() == std::vector<double>{1.0, -0.5, 10.0});
  const Tensor& c = file.at("c");
  REQUIRE(c.dtype() == DType::float64);
  CHECK(c.dim() == 0);
  CHECK(c.item() == 3.141592653589793);
  const Tensor& m = file.at("m");
  REQUIRE(m.dtype() == DType::boolean);
  CHECK(m.shape() == Shape{1, 3});
  CHECK(m.to_int_vector() == std::vector<int64_t>{1, 0, 1});
  CHECK(file.at("e").numel() == 0);
  CHECK(file.at("e").dtype() == DType::float32);
}

TEST_CASE("train: corrupted safetensors files are IOErrors naming the file and tensor") {
  TempDir dir("tapegrad_test_safetensors");
  struct Case {
    std::string name;
    Bytes bytes;
    std::string what;  // a piece of the expected message
  };
  const auto header_only = [](const std::string& h, const Bytes& buffer) { return file_bytes(h, buffer); };
  const std::vector<Case> cases = {
      {"empty", "", "too short"},
      {"five_bytes", Bytes("\x10\0\0\0\0", 5), "too short"},
      {"huge_header_length", u64_le(uint64_t{1} << 63) + "{}", "runs past the end"},
      {"header_length_one_past_end", u64_le(3) + "{}", "runs past the end"},
      {"header_length_all_ones", u64_le(UINT64_MAX) + "{}      ", "runs past the end"},
      {"zero_header_length", u64_le(0) + "{}", "does not start with '{'"},
      {"bad_json", header_only(R"({"x":{"dtype":"F32",)", ""), "not valid JSON"},
      {"trailing_garbage", header_only("{} x", ""), "header has byte 0x78 at byte 11 of the file, after its JSON object"},
      {"non_object_header", header_only("[1, 2]", ""), "does not start with '{'"},
      {"header_string", header_only("\"{}\"", ""), "does not start with '{'"},
      {"entry_not_object", header_only(R"({"x":5})", ""), "'x'"},
      {"unknown_dtype", header_only(R"({"x":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", Bytes(4, 0)),
       "unsupported dtype"},
      {"dtype_not_string", header_only(R"({"x":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", kEightBytes), "dtype"},
      {"missing_offsets", header_only(R"({"x":{"dtype":"F32","shape":[2]}})", kEightBytes), "data_offsets"},
      {"unknown_field", header_only(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"z":1}})", kEightBytes),
       "unknown field \"z\""},
      {"negative_dim", header_only(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", kEightBytes),
       "non-negative"},
      {"fractional_dim", header_only(R"({"x":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", kEightBytes),
       "non-negative"},
      {"shape_not_array", header_only(R"({"x":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", kEightBytes), "shape"},
      {"too_many_dims",
       header_only(R"({"x":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1,1,1,1,2],"data_offsets":[0,8]}})", kEightBytes),
       "at most"},
      {"size_mismatch", header_only(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", kEightBytes),
       "needs 12 bytes"},
      {"dtype_size_mismatch", header_only(R"({"x":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", kEightBytes),
       "needs 16 bytes"},
      {"overflowing_shape",
       header_only(R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", kEightBytes),
       "more elements than int64"},
      {"wrapping_shape",  // 2^62 * 4 bytes wraps to 0 in 64 bits: must not match data_offsets [0, 0]
       header_only(R"({"x":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", ""),
       "needs 2^64 bytes or more"},
      {"huge_number", header_only(R"({"x":{"dtype":"F32","shape":[1e400],"data_offsets":[0,8]}})", kEightBytes),
       "not valid JSON"},
      {"offsets_past_end", header_only(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", kEightBytes),
       "past the end"},
      {"offsets_reversed", header_only(R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", kEightBytes),
       "end before they begin"},
      {"offsets_one_number", header_only(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8]}})", kEightBytes),
       "data_offsets"},
      {"overlapping",
       header_only("{" + kEntryX + R"(,"y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", Bytes(12, 0)),
       "overlaps"},
      {"aliased", header_only("{" + kEntryX + R"(,"y":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", kEightBytes),
       "overlaps"},
      {"gap", header_only(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", Bytes(12, 0)), "unused"},
      {"trailing_bytes", header_only("{" + kEntryX + "}", Bytes(12, 0)), "belong to no tensor"},
      {"duplicate_name", header_only("{" + kEntryX + "," + kEntryX + "}", kEightBytes), "twice"},
      {"duplicate_field",
       header_only(R"({"x":{"dtype":"F32","dtype":"I64","shape":[1],"data_offsets":[0,8]}})", kEightBytes), "twice"},
      {"metadata_not_object", header_only(R"({"__metadata__":["a"]})", ""), "__metadata__"},
      {"metadata_not_string", header_only(R"({"__metadata__":{"step":3}})", ""), "__metadata__ \"step\" is not a string"},
      {"bool_byte_not_0_or_1", header_only(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", "\x01\x02"),
       "BOOL byte 1"},
      {"invalid_utf8_name", header_only("{\"\xff\":{}}", ""), "not valid UTF-8 at byte 10"},
      {"deep_nesting", header_only(R"({"x":{"dtype":"F32","shape":[[[[[[2]]]]]],"data_offsets":[0,8]}})", kEightBytes),
       "nests deeper"},
  };
  for (const Case& c : cases) {
    const std::string path = dir / (c.name + ".safetensors");
    write_file(path, c.bytes);
    INFO(c.name);
    const std::string message = error_of(path);
    CHECK_THAT(message, Catch::StartsWith(path + ": ") && Catch::Contains(c.what));
  }
  // Tensor-level problems name the tensor.
  CHECK_THAT(error_of(dir / "size_mismatch.safetensors"), Catch::Contains("tensor 'x'"));
  CHECK_THAT(error_of(dir / "overlapping.safetensors"), Catch::Contains("'x'") && Catch::Contains("'y'"));
  CHECK_THAT(error_of(dir / "missing.safetensors"), Catch::Contains("cannot open"));
  CHECK_THAT(error_of(dir.path.string()), Catch::Contains("directory"));
}

TEST_CASE("train: a safetensors header longer than 100 MB is refused before it is read") {
  TempDir dir("tapegrad_test_safetensors");
  const std::string path = dir / "big.safetensors";
  write_file(path, u64_le(kMaxSafetensorsHeader + 8) + "{}");
  fs::resize_file(path, kMaxSafetensorsHeader + 64);  // sparse: no 100 MB is written
  CHECK_THAT(error_of(path), Catch::Contains("exceeds the limit"));
}

TEST_CASE("train: every truncation of a safetensors file is an IOError and random header damage loads a consistent file or is one") {
  TempDir dir("tapegrad_test_safetensors");
  const std::string good = dir / "good.safetensors";
  save_safetensors(good, {{"w", ones({2, 3})}, {"ids", ids({1, 2}, {2})}, {"m", mask({1, 0}, {2})}}, {{"k", "v"}});
  const Bytes bytes = read_file(good);
  const std::string path = dir / "damaged.safetensors";
  for (size_t n = 0; n < bytes.size(); ++n) {
    write_file(path, bytes.substr(0, n));
    INFO("truncated to " << n << " of " << bytes.size() << " bytes");
    CHECK_THROWS_AS(load_safetensors(path), IOError);
  }
  // Random byte changes in the length and header: each is an IOError (any other exception fails the test), or
  // loads a file whose tensors cover its data section exactly, as a file that was written whole does.
  const auto header_length = [](const Bytes& file) {
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(file[i])) << (8 * i);
    return n;
  };
  const uint64_t N = header_length(bytes);
  Generator gen(17);
  int refused = 0, loaded = 0;
  for (int trial = 0; trial < 500; ++trial) {
    Bytes damaged = bytes;
    const int changes = 1 + static_cast<int>(gen.below(3));
    for (int k = 0; k < changes; ++k) damaged[gen.below(8 + N)] = static_cast<char>(gen.below(256));
    write_file(path, damaged);
    INFO("trial " << trial);
    try {
      const SafetensorsFile file = load_safetensors(path);
      uint64_t data_bytes = 0;
      for (const auto& [name, t] : file.tensors) data_bytes += static_cast<uint64_t>(t.numel()) * itemsize(t.dtype());
      CHECK(data_bytes == damaged.size() - 8 - header_length(damaged));
      ++loaded;
    } catch (const IOError&) {
      ++refused;
    }
  }
  CHECK(refused > loaded);  // the damage is real: most of it is refused
}
