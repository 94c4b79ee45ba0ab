// Files from elsewhere are hostile: every bad checkpoint file, data file or settings file tapegrad reads
// must give one error line naming the file, the line or field, and what is wrong; never a crash, an abort,
// a hang or an allocation the file's size does not justify. Each table row is one bad input, run as a
// SECTION of its stable name: how the file is made, the function (or command) that reads it the way
// tapegrad does, and the words the error must contain. Rows marked "fuzz:" are findings of tests/fuzz.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include "autograd/error.h"
#include "autograd/random.h"
#include "optim/adam.h"
#include "support/cli.h"
#include "support/temp_dir.h"
#include "train/checkpoint/checkpoint.h"
#include "train/io/read_file.h"
#include "train/checkpoint/safetensors.h"
#include "train/train_options.h"
#include "train/data/tokenizer.h"
#include "train/data/tsv.h"
#include "train/io/base64.h"

using namespace tapegrad;
using testing::quote;
using testing::require_one_line_error;
using testing::run_cli;
using testing::TempDir;
namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::string_literals;

namespace {

std::string u64_le(uint64_t v) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

/// A safetensors file from its header text and buffer.
std::string safetensors(const std::string& header, const std::string& buffer) {
  return u64_le(header.size()) + header + buffer;
}

void write(const std::string& path, const std::string& bytes) {
  std::error_code ignored;
  fs::remove(path, ignored);
  std::ofstream(path, std::ios::binary) << bytes;
}

/// A tiny trained-shape model: vocab <pad> <unk> <cls> a b c, d_model 4, 2 heads, d_ff 8, one layer,
/// context 4, labels neg and pos.
nn::ClassifierOptions tiny_options() {
  nn::ClassifierOptions o{6};
  o.d_model = 4;
  o.n_heads = 2;
  o.d_ff = 8;
  o.n_layers = 1;
  o.context_length = 4;
  o.num_classes = 2;
  o.dropout = 0;
  return o;
}

/// A whole checkpoint folder written the way training writes one, made once per process.
const std::string& base_checkpoint() {
  static TempDir dir("tapegrad_test_hostile_base");
  static const std::string folder = [] {
    const std::string path = dir / "checkpoint";
    Generator init(5);
    nn::SequenceClassifier model(tiny_options(), init, nullptr);
    const Vocab vocab = Vocab::build({"a b c"});
    const std::vector<std::string> labels = {"neg", "pos"};
    optim::Adam optimizer(model.named_parameters(), {.lr = 0.01});
    write_checkpoint_folder(path, {&model, model_config_json(model.options()), &vocab, &labels, &optimizer, json()});
    return path;
  }();
  return folder;
}

/// config.json of the base checkpoint, for edits.
json base_config() { return model_config_json(tiny_options()); }

/// The base checkpoint's weights, for edits.
nn::NamedTensors base_weights() { return load_safetensors(base_checkpoint() + "/model.safetensors").tensors; }

void save_weights(const std::string& folder, const nn::NamedTensors& weights) {
  save_safetensors(folder + "/model.safetensors", weights);
}

/// A fresh Adam over a tiny model's parameters: what --resume loads optimizer.safetensors into.
struct OptimizerFixture {
  Generator init{5};
  nn::SequenceClassifier model{tiny_options(), init, nullptr};
  optim::Adam optimizer{model.named_parameters(), {.lr = 0.01}};
};

struct Case {
  std::string name;                                  // the SECTION: stable across runs
  std::string file;                                  // the file the error names, relative to the folder
  std::function<void(const std::string&)> make;      // writes the bad file(s) into the case's folder
  std::function<void(const std::string&)> read;      // reads the folder the way tapegrad does
  std::string problem;                               // what the error must say
};

/// A file of these bytes at `file`, read by `reader` on its path.
Case bytes_case(std::string name, std::string file, std::string contents,
                std::function<void(const std::string&)> reader, std::string problem) {
  const std::string target = file;
  return {std::move(name), std::move(file),
          [target, contents](const std::string& folder) { write(folder + "/" + target, contents); },
          [target, reader](const std::string& folder) { reader(folder + "/" + target); }, std::move(problem)};
}

/// The base checkpoint copied into the folder, then `edit`ed; read by load_model.
Case checkpoint_case(std::string name, std::string file, std::function<void(const std::string&)> edit,
                     std::string problem) {
  return {std::move(name), std::move(file),
          [edit](const std::string& folder) {
            fs::remove_all(folder);
            fs::copy(base_checkpoint(), folder);
            edit(folder);
          },
          [](const std::string& folder) { load_model(folder); }, std::move(problem)};
}

/// Runs each case as a SECTION: the error is a tapegrad::Error whose single line names the file and
/// the problem; and docs/reliability.md lists the case by name.
void run_cases(const std::vector<Case>& cases) {
  TempDir dir("tapegrad_test_hostile");
  const std::string docs = testing::read_file(std::string(TAPEGRAD_SOURCE_DIR) + "/docs/reliability.md");
  for (const Case& c : cases) {
    SECTION(c.name) {
      INFO("docs/reliability.md lists \"" << c.name << "\"");
      CHECK_THAT(docs, Catch::Contains("| " + c.name + " |"));
      const std::string folder = dir / c.name;
      fs::create_directories(folder);
      c.make(folder);
      const std::string file = c.file.rfind('/', 0) == 0 ? c.file : folder + "/" + c.file;
      try {
        c.read(folder);
        FAIL("no error for " << c.name);
      } catch (const Error& e) {
        const std::string message = e.what();
        INFO(message);
        CHECK_THAT(message, Catch::Contains(file));
        CHECK_THAT(message, Catch::Contains(c.problem));
        CHECK(message.find('\n') == std::string::npos);
        // The rows of docs/reliability.md's tables: TAPEGRAD_PRINT_ERRORS=1 test_train "hostile files*"
        if (std::getenv("TAPEGRAD_PRINT_ERRORS")) {
          std::string shown = message;
          for (size_t at; (at = shown.find(folder + "/")) != std::string::npos;) shown.erase(at, folder.size() + 1);
          for (size_t at = 0; (at = shown.find('|', at)) != std::string::npos; at += 2) shown.insert(at, "\\");
          std::printf("| %s | `%s` |\n", c.name.c_str(), shown.c_str());
        }
      }
    }
  }
}

void read_safetensors(const std::string& path) { load_safetensors(path); }
void read_config(const std::string& path) { read_model_config(path); }
void read_vocab(const std::string& path) { Vocab::load(path); }
void read_label_file(const std::string& path) { read_labels(path); }
void read_data(const std::string& path) { read_tsv(path); }

// A SentencePiece model's normalisation table (NormalizerSpec.precompiled_charsmap): <the trie's size in
// bytes, 4 bytes little-endian><the trie: Darts-clone double-array units><NUL-ended strings>.
std::string u32_le(uint32_t v) { return u64_le(v).substr(0, 4); }

std::string protobuf_varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out += static_cast<char>(v & 0x7f | 0x80);
  return out + static_cast<char>(v);
}

std::string charsmap(const std::vector<uint32_t>& units, const std::string& strings) {
  std::string table = u32_le(static_cast<uint32_t>(4 * units.size()));
  for (const uint32_t unit : units) table += u32_le(unit);
  return table + strings;
}

// Darts-clone's units: a node's children sit at (its position ^ offset) ^ label, and a node with a leaf
// keeps its value (an offset into the strings) at (its position ^ offset). A unit that is no child of
// anyone has the top bit set, a label no byte matches.
constexpr uint32_t kNoChild = 1u << 31;
constexpr uint32_t node_unit(uint32_t label, uint32_t offset, bool leaf) { return offset << 10 | leaf << 8 | label; }
constexpr uint32_t value_unit(uint32_t value) { return 1u << 31 | value; }

/// The trie of the rules "a" -> "b", "aa" -> "b", ... (`rules` of them, each node a block of 256 units of
/// its own), so that a run of a's matches them all at once; or, with `cycle`, of one node whose 'a' leads
/// back to itself, so that a run of a's matches without end.
std::vector<uint32_t> rules_of_a(uint32_t rules, bool cycle = false) {
  std::vector<uint32_t> units(256 * (rules + 2), kNoChild);
  units[0] = node_unit(0, 256, false);
  for (uint32_t depth = 1; depth <= rules; ++depth) {
    const uint32_t at = 256 * depth ^ 'a';
    const uint32_t children = cycle ? 256 * depth : 256 * (depth + 1);
    units[at] = node_unit('a', at ^ children, true);
    units[children] = value_unit(0);
  }
  return units;
}

/// tokenizer.json of a bpe tokenizer learnt here, its model followed by a normalizer_spec holding `table`:
/// protobuf merges the two specs, so the model normalises its texts with that table (field 3 of ModelProto;
/// 5, denormalizer_spec, with `field` 5).
std::string tokenizer_with_table(const std::string& table, uint32_t field = 3) {
  static const std::string model =
      base64_decode(Tokenizer::learn_bpe("the bat sat on the mat\n", 12).to_json().at("model").get<std::string>());
  const std::string spec = "\x12" + protobuf_varint(table.size()) + table;
  const std::string appended = static_cast<char>(field << 3 | 2) + protobuf_varint(spec.size()) + spec;
  return json{{"kind", "bpe"}, {"model", base64_encode(model + appended)}}.dump();
}

/// tokenizer.json of the same learnt model with one more piece, of this text, after its 12 (ModelProto's
/// field 1 is repeated: a field appended is a piece appended).
std::string tokenizer_with_piece(const std::string& text) {
  static const std::string model =
      base64_decode(Tokenizer::learn_bpe("the bat sat on the mat\n", 12).to_json().at("model").get<std::string>());
  const std::string piece = "\x0a" + protobuf_varint(text.size()) + text;
  return json{{"kind", "bpe"}, {"model", base64_encode(model + "\x0a" + protobuf_varint(piece.size()) + piece)}}.dump();
}

void read_tokenizer(const std::string& path) { Tokenizer::load(path); }

const std::string kF32x2 = R"("x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
const std::string kEight(8, '\0');

/// config.json of the tiny model with one key changed (or removed when value is null and remove is set).
std::string config_with(const std::string& key, const json& value) {
  json config = base_config();
  config[key] = value;
  return config.dump();
}

/// As an older tapegrad wrote it: no "settings", and this key (a setting's old name) at the top level.
std::string config_without_settings_with(const std::string& key, const json& value) {
  json config = base_config();
  config.erase("settings");
  config[key] = value;
  return config.dump();
}

std::string config_without(const std::string& key) {
  json config = base_config();
  config.erase(key);
  return config.dump();
}

}  // namespace

TEST_CASE("hostile files: safetensors headers and buffers") {
  const auto st = [](std::string name, std::string contents, std::string problem) {
    return bytes_case(std::move(name), "model.safetensors", std::move(contents), read_safetensors, std::move(problem));
  };
  run_cases({
      st("too short for the length", "abc", "3 bytes is too short"),
      st("empty file", "", "0 bytes is too short"),
      st("header length 2^63", u64_le(uint64_t{1} << 63) + "{}", "header length 9223372036854775808 runs past the end"),
      st("header length past the end", u64_le(100) + "{}", "runs past the end of the 10-byte file"),
      st("truncated buffer", safetensors("{" + kF32x2 + "}", "1234"), "needs 8 bytes, more than the buffer's 4"),
      st("negative dim", safetensors(R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", ""),
         "is not an array of non-negative integers"),
      st("overflowing shape",
         safetensors(R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", ""),
         "has more elements than int64 holds"),
      st("shape bytes overflow",
         safetensors(R"({"x":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", ""),
         "needs 2^64 bytes or more"),
      st("shape larger than the buffer", safetensors(R"({"x":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", kEight),
         "needs 16 bytes, more than the buffer's 8"),
      st("offsets out of range", safetensors(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,100]}})", kEight),
         "data_offsets [0, 100] run past the end of the 8-byte buffer"),
      st("offsets reversed", safetensors(R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", kEight),
         "end before they begin"),
      st("size mismatch", safetensors(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", kEight),
         "needs 4 bytes but data_offsets [0, 8] hold 8"),
      st("overlap",
         safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                     std::string(12, '\0')),
         "tensor 'b' [4, 12) overlaps tensor 'a' [0, 8)"),
      st("hole",
         safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                     R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                     std::string(12, '\0')),
         "leaving bytes [4, 8) of the buffer unused"),
      st("trailing bytes", safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", kEight),
         "bytes [4, 8) of the buffer belong to no tensor"),
      st("duplicate name", safetensors("{" + kF32x2 + "," + kF32x2 + "}", kEight), "has the key \"x\" twice"),
      st("metadata value not a string", safetensors(R"({"__metadata__":{"format":1}})", ""),
         "__metadata__ \"format\" is not a string"),
      st("metadata not an object", safetensors(R"({"__metadata__":["pt"]})", ""), "__metadata__ is a JSON array"),
      st("unknown dtype", safetensors(R"({"x":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})", kEight),
         "unsupported dtype \"F16\""),
      st("dtype not a string", safetensors(R"({"x":{"dtype":32,"shape":[2],"data_offsets":[0,8]}})", kEight),
         "dtype is not a string"),
      st("entry without offsets", safetensors(R"({"x":{"dtype":"F32","shape":[2]}})", kEight),
         "entry needs dtype, shape and data_offsets"),
      st("unknown entry field",
         safetensors(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"z":1}})", kEight),
         "unknown field \"z\""),
      st("header not JSON", safetensors("{nope", ""), "header is not valid JSON"),
      st("header not an object", safetensors("[1]", ""), "header does not start with '{'"),
      st("header not UTF-8", safetensors("{\"\xc3\x28\":1}", ""), "header is not valid UTF-8 at byte 10"),
      st("header nests deeper",
         safetensors(R"({"x":{"dtype":"F32","shape":[[[2]]],"data_offsets":[0,8]}})", kEight), "nests deeper"),
      st("BOOL byte not 0 or 1", safetensors(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", "\x01\x02"),
         "tensor 'm': BOOL byte 1 is 2"),
      st("newline in a tensor name",
         safetensors("{\"a\\nb\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", kEight),
         "tensor name \"a\\nb\" contains a control character"),
      st("empty tensor name", safetensors(R"({"":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", kEight),
         "a tensor has an empty name"),
      // The header is one JSON object padded only with spaces: nothing the parser skips may follow it.
      st("header NUL then a hidden object",
         safetensors("{" + kF32x2 + "}" + std::string(1, '\0') + R"({"hidden":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})", kEight),
         "header has a NUL byte at byte 62 of the file"),
      st("header padded with NUL bytes", safetensors("{" + kF32x2 + "}" + std::string(3, '\0'), kEight),
         "header has a NUL byte at byte 62"),
      st("header followed by a second object", safetensors("{" + kF32x2 + "} {}", kEight),
         "header has byte 0x7b at byte 63 of the file, after its JSON object (bytes [8, 62))"),
      st("header padded with a newline", safetensors("{" + kF32x2 + "}\n  ", kEight),
         "header has byte 0x0a at byte 62 of the file"),
      st("header padded with a tab", safetensors("{" + kF32x2 + "}  \t", kEight), "header has byte 0x09 at byte 64"),
      st("header followed by garbage", safetensors("{" + kF32x2 + "}garbage", kEight),
         "header has byte 0x67 at byte 62 of the file, after its JSON object (bytes [8, 62)); only spaces (0x20) may pad"),
      st("header object with a brace in a name and trailing bytes",
         safetensors(R"({"x}\"{":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}x)", kEight), "header has byte 0x78 at byte 66"),
  });
}

TEST_CASE("hostile files: a safetensors header padded with spaces is read, as the format allows") {
  TempDir dir("tapegrad_test_hostile");
  const std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"a":"}"}})";
  for (const size_t spaces : {0, 1, 7, 100}) {
    INFO(spaces << " spaces");
    const SafetensorsFile file =
        parse_safetensors(safetensors(header + std::string(spaces, ' '), kEight), dir / "model.safetensors");
    CHECK(file.tensors.size() == 1);
    CHECK(file.metadata.at("a") == "}");
  }
}

TEST_CASE("hostile files: model.safetensors that does not fit config.json") {
  const auto edited = [](std::function<void(nn::NamedTensors&)> edit) {
    return [edit](const std::string& folder) {
      nn::NamedTensors weights = base_weights();
      edit(weights);
      save_weights(folder, weights);
    };
  };
  const auto set_element = [](nn::NamedTensors& w, size_t entry, int64_t element, double value) {
    std::vector<double> values = w[entry].second.to_vector();
    values[static_cast<size_t>(element)] = value;
    w[entry].second = tensor(values, w[entry].second.shape(), DType::float32);
  };
  run_cases({
      checkpoint_case("missing and unexpected tensors", "model.safetensors",
                      edited([](nn::NamedTensors& w) {
                        w.pop_back();                           // head.bias
                        w.erase(w.begin() + 2);                 // encoder.layers.0.self_attn.in_proj_weight
                        w.emplace_back("foo", zeros({3}));
                      }),
                      "load_state_dict: 2 missing ('encoder.layers.0.self_attn.in_proj_weight' [12,4], "
                      "'head.bias' [2]), 1 unexpected ('foo' [3])"),
      checkpoint_case("wrongly shaped tensor", "model.safetensors",
                      edited([](nn::NamedTensors& w) { w[w.size() - 2].second = zeros({3, 4}); }),
                      "1 wrongly shaped ('head.weight': given [3,4], expected [2,4])"),
      checkpoint_case("F64 tensor into the float32 model", "model.safetensors",
                      edited([](nn::NamedTensors& w) { w.back().second = w.back().second.to(DType::float64); }),
                      "'head.bias' is float64 and the module float32: narrowing would lose precision"),
      checkpoint_case("I64 tensor", "model.safetensors",
                      edited([](nn::NamedTensors& w) { w.back().second = zeros({2}, DType::int64); }),
                      "'head.bias' is int64, not a float"),
      checkpoint_case("NaN weight", "model.safetensors",
                      edited([&](nn::NamedTensors& w) { set_element(w, 0, 5, std::nan("")); }),
                      "tensor 'embed.weight' element 5 is nan"),
      checkpoint_case("infinite weight", "model.safetensors",
                      edited([&](nn::NamedTensors& w) {
                        set_element(w, w.size() - 1, 1, -std::numeric_limits<double>::infinity());
                      }),
                      "tensor 'head.bias' element 1 is -inf"),
      checkpoint_case("config claims a huge model beside small weights", "model.safetensors",
                      [](const std::string& folder) {
                        write(folder + "/config.json", config_with("n_layers", 65536));
                      },
                      "describes a model of 11272242 parameters"),
      checkpoint_case("weights file is a directory", "model.safetensors",
                      [](const std::string& folder) {
                        fs::remove(folder + "/model.safetensors");
                        fs::create_directory(folder + "/model.safetensors");
                      },
                      "is a directory, not a file"),
      checkpoint_case("vocab shorter than config", "vocab.txt",
                      [](const std::string& folder) { write(folder + "/vocab.txt", "<pad>\n<unk>\n<cls>\na\nb\n"); },
                      "5 tokens, but config.json says vocab_size 6"),
      checkpoint_case("labels longer than config", "labels.txt",
                      [](const std::string& folder) { write(folder + "/labels.txt", "neg\npos\nmeh\n"); },
                      "3 labels, but config.json says num_classes 2"),
  });
}

TEST_CASE("hostile files: config.json") {
  const auto cfg = [](std::string name, std::string contents, std::string problem) {
    return bytes_case(std::move(name), "config.json", std::move(contents), read_config, std::move(problem));
  };
  run_cases({
      cfg("empty file", "", "empty file (expected a JSON object)"),
      cfg("only whitespace", " \n\t\n", "empty file"),
      cfg("not an object", "[1, 2]", "the file must be a JSON object, got array"),
      cfg("invalid JSON", "{\"d_model\": ", "not valid JSON"),
      cfg("float for an integer", config_with("d_model", 32.5), "'d_model' must be an integer, got 32.5"),
      cfg("integral float for an integer", config_with("d_model", 32.0), "'d_model' must be an integer, got 32.0"),
      cfg("string for an integer", config_with("n_heads", "2"), "'n_heads' must be an integer, got \"2\""),
      cfg("bool for a number", config_with("dropout", true), "'dropout' must be a number, got true"),
      cfg("number for a bool", config_with("norm_first", 1), "'norm_first' must be true or false, got 1"),
      cfg("integer beyond int64", config_with("d_model", uint64_t{18446744073709551615u}),
          "'d_model' = 18446744073709551615 is out of range"),
      cfg("missing key", config_without("pad_id"), "'pad_id' is missing"),
      cfg("misspelt key", config_with("d_modle", 4), "unknown key \"d_modle\""),
      cfg("duplicate key", "{\"d_model\": 4, \"d_model\": 8}", "key \"d_model\" appears twice"),
      cfg("vocab_size 2^60", config_with("vocab_size", int64_t{1} << 60),
          "vocab_size = 1152921504606846976 is outside [1, 16777216]"),
      cfg("zero heads", config_with("n_heads", 0), "n_heads = 0 must be >= 1"),
      cfg("heads not dividing d_model", config_with("n_heads", 3), "n_heads = 3 does not divide d_model = 4"),
      cfg("one class", config_with("num_classes", 1), "num_classes = 1 is outside [2, "),
      cfg("negative layers", config_with("n_layers", -1), "n_layers = -1 is outside [0, 65536]"),
      cfg("dropout 1", config_with("dropout", 1.0), "dropout = 1 is outside [0, 1)"),
      cfg("zero norm eps", config_with("settings", {{"attention", {{"causal", false}, {"temperature", 1.0}}}, {"norm", {{"eps", 0}}}}),
          "norm.eps must be a finite number in (0, 1], got 0"),
      cfg("zero layer_norm_eps of an older file", config_without_settings_with("layer_norm_eps", 0),
          "norm.eps must be a finite number in (0, 1], got 0"),
      cfg("setting of a variant not chosen", config_with("settings", {{"ffn", {{"top_k", 1}}}}),
          "ffn.top_k applies to ffn = moe only, not ffn = dense"),
      cfg("pad_id outside the vocabulary", config_with("pad_id", 6), "pad_id = 6 is outside the vocabulary [0, 6)"),
      cfg("unknown activation", config_with("activation", "swish"),
          "activation = 'swish' is not registered (registered: relu or gelu)"),
      // A checkpoint of a program with its own components, opened by one without them.
      cfg("unregistered norm component", config_with("norm", "rmsnorm"),
          "norm = 'rmsnorm' is not registered (registered: layernorm)"),
      cfg("nested value", config_with("d_model", json::array({json::array({json::array({4})})})),
          "JSON nests deeper than 3 levels"),
      cfg("another kind of model", config_with("kind", "language_model"),
          "'kind' is 'language_model': this tapegrad rebuilds only 'classifier' models"),
      cfg("kind not a string", config_with("kind", 1), "'kind' must be a string"),
  });
}

TEST_CASE("hostile files: vocab.txt and labels.txt") {
  const std::string head = "<pad>\n<unk>\n<cls>\n";
  const auto vocab = [](std::string name, std::string contents, std::string problem) {
    return bytes_case(std::move(name), "vocab.txt", std::move(contents), read_vocab, std::move(problem));
  };
  const auto labels = [](std::string name, std::string contents, std::string problem) {
    return bytes_case(std::move(name), "labels.txt", std::move(contents), read_label_file, std::move(problem));
  };
  run_cases({
      vocab("vocab empty file", "", "empty file (a vocabulary starts with <pad>, <unk>, <cls>)"),
      vocab("vocab only a BOM", "\xef\xbb\xbf", "empty file"),
      vocab("vocab invalid UTF-8", head + "a\xff\n", ":4: invalid UTF-8 at byte 2 of the line"),
      vocab("vocab NUL byte", head + std::string("a\0b\n", 4), ":4: NUL byte at byte 2 of the line"),
      vocab("vocab empty line", head + "a\n\nb\n", ":5: empty line"),
      vocab("vocab duplicate token", head + "a\nb\na\n", ":6: duplicate token 'a' (first on line 4)"),
      vocab("vocab whitespace in a token", head + "a b\n", ":4: token 'a b' contains whitespace"),
      vocab("vocab reserved token missing", "<unk>\n<pad>\n<cls>\n", ":1: expected the reserved token <pad>"),
      vocab("vocab shorter than the reserved tokens", "<pad>\n<unk>\n", ":3: missing the reserved token <cls>"),
      labels("labels empty file", "", "empty file: no labels"),
      labels("labels empty line", "neg\n\npos\n", ":2: empty label"),
      labels("labels duplicate", "neg\npos\nneg\n", ":3: duplicate label 'neg'"),
      labels("labels tab", "neg\tx\npos\n", ":1: label contains a tab at byte 4"),
      labels("labels invalid UTF-8", "n\xc0g\npos\n", ":1: invalid UTF-8 at byte 2"),
      labels("labels NUL byte", std::string("neg\npo\0s\n", 9), ":2: NUL byte at byte 3"),
      labels("labels surrounding whitespace", "neg\n pos\n", ":2: label ' pos' has leading or trailing whitespace"),
      vocab("vocab CR-only line ends", "<pad>\r<unk>\r<cls>\ra\r",
            "vocab.txt:1: carriage return without a line feed at byte 6 of the line: CR-only line endings"),
      labels("labels CR-only line ends", "neg\rpos\r", "labels.txt:1: carriage return without a line feed at byte 4"),
      labels("labels CR-only after a BOM", "\xef\xbb\xbfneg\rpos", "labels.txt:1: carriage return without a line feed at byte 4"),
      labels("labels CR inside a label", "neg\npo\rs\r\n", "labels.txt:2: carriage return without a line feed at byte 3"),
  });
}

// fuzz: fuzz_tokenizer's subject. libsentencepiece uses a model's normalisation table as it is: each of the
// first five rows crashed Debian's 0.1.97 (SIGSEGV) as a text was encoded. The reader refuses them before
// the library sees the model, and a denormaliser's table (unused by 0.1.97) and the protobuf alike.
TEST_CASE("hostile files: a SentencePiece model's normalisation table in tokenizer.json") {
  const auto table = [](std::string name, std::string contents, std::string problem) {
    return bytes_case(std::move(name), "tokenizer.json", std::move(contents), read_tokenizer, std::move(problem));
  };
  std::vector<uint32_t> far_children = rules_of_a(1);
  far_children[0] = node_unit(0, 1u << 20, false);
  std::vector<uint32_t> far_string = rules_of_a(1);
  far_string[512] = value_unit(1000);
  const std::string model = base64_decode(
      json::parse(tokenizer_with_table(charsmap(rules_of_a(1), "b\0"s))).at("model").get<std::string>());
  run_cases({
      table("tokenizer table's trie past its end", tokenizer_with_table(u32_le(8) + "abcdef"),
            "'model': not a SentencePiece model (normalizer_spec.precompiled_charsmap: a trie of 8 bytes in 6 bytes)"),
      table("tokenizer table's children outside the trie", tokenizer_with_table(charsmap(far_children, "b\0"s)),
            "node 0's children lie past the trie's 768 units"),
      table("tokenizer table's string outside the table", tokenizer_with_table(charsmap(far_string, "b\0"s)),
            "node 353 maps to byte 1000 of 2 bytes of strings"),
      table("tokenizer table's trie with a cycle", tokenizer_with_table(charsmap(rules_of_a(1, true), "b\0"s)),
            "node 353 is its own descendant"),
      table("tokenizer table of 33 rules at once", tokenizer_with_table(charsmap(rules_of_a(33), "b\0"s)),
            "a text can match more than 32 of its rules at once"),
      table("tokenizer denormaliser table with a cycle",
            tokenizer_with_table(charsmap(rules_of_a(1, true), "b\0"s), 5),
            "denormalizer_spec.precompiled_charsmap: node 353 is its own descendant"),
      // Pieces the library cannot index: as a C string (an empty key throws out of its trie builder) and
      // recursively (a piece of 128 KiB overflows the stack).
      table("tokenizer piece that starts with a NUL byte", tokenizer_with_piece("\0ab"s),
            "'model': not a SentencePiece model (piece 12: a NUL byte in the piece)"),
      table("tokenizer piece that is empty", tokenizer_with_piece(""), "(piece 12: an empty piece)"),
      table("tokenizer piece of 128 KiB", tokenizer_with_piece(std::string(128 << 10, 'a')),
            "(piece 12: a piece of 131072 bytes, where the longest read is 4096)"),
      table("tokenizer model's protobuf cut short",
            json{{"kind", "bpe"}, {"model", base64_encode(model.substr(0, model.size() - 3))}}.dump(),
            "not a SentencePiece model (the ModelProto: a field of "),
  });
}

TEST_CASE("hostile files: a normalisation table of 32 rules at once is read, and normalises the text") {
  TempDir dir("tapegrad_test_hostile");
  const std::string path = dir.file("tokenizer.json", tokenizer_with_table(charsmap(rules_of_a(32), "b\0"s)));
  const Tokenizer tokenizer = Tokenizer::load(path);
  // The longest rule wins: 32 a's are one "b", 33 are "b" then "b" (the 33rd a is a rule of its own).
  CHECK(tokenizer.decode(tokenizer.encode(std::string(32, 'a'))) == "b");
  CHECK(tokenizer.decode(tokenizer.encode(std::string(33, 'a') + " the")) == "bb the");
}

TEST_CASE("hostile files: BOM and CRLF in vocab.txt and labels.txt are accepted, as in TSV") {
  TempDir dir("tapegrad_test_hostile");
  const Vocab vocab = Vocab::load(dir.file("vocab.txt", "\xef\xbb\xbf<pad>\r\n<unk>\r\n<cls>\r\nfilm\r\n"));
  CHECK(vocab.tokens() == std::vector<std::string>{"<pad>", "<unk>", "<cls>", "film"});
  CHECK(read_labels(dir.file("labels.txt", "\xef\xbb\xbfneg\r\npos")) == std::vector<std::string>{"neg", "pos"});
  // A CRLF file whose last LF was lost ends in a lone CR: still CRLF, not a CR-only file.
  CHECK(read_labels(dir.file("labels.txt", "neg\r\npos\r")) == std::vector<std::string>{"neg", "pos"});
  CHECK(parse_tsv("pos\tgood film\r\nneg\tbad film\r", "data.tsv").examples.size() == 2);
}

TEST_CASE("hostile files: TSV data, special files and size limits") {
  const auto tsv = [](std::string name, std::string contents, std::string problem) {
    return bytes_case(std::move(name), "data.tsv", std::move(contents), read_data, std::move(problem));
  };
  const auto sparse = [](std::string name, std::string file, uint64_t size,
                         std::function<void(const std::string&)> reader, std::string problem) {
    return Case{std::move(name), file,
                [file, size](const std::string& folder) {
                  write(folder + "/" + file, "");
                  fs::resize_file(folder + "/" + file, size);  // sparse: nothing is written
                },
                [file, reader](const std::string& folder) { reader(folder + "/" + file); }, std::move(problem)};
  };
  const auto directory = [](std::string name, std::string file, std::function<void(const std::string&)> reader) {
    return Case{std::move(name), file, [file](const std::string& folder) { fs::create_directory(folder + "/" + file); },
                [file, reader](const std::string& folder) { reader(folder + "/" + file); },
                "is a directory, not a file"};
  };
  const auto device = [](std::string name, std::function<void(const std::string&)> reader) {
    return Case{std::move(name), "/dev/zero", [](const std::string&) {}, [reader](const std::string&) { reader("/dev/zero"); },
                "/dev/zero: is a device, not a file"};
  };
  run_cases({
      tsv("TSV NUL byte", std::string("pos\tgood\nneg\tba\0d\n", 17), "data.tsv:2: NUL byte at byte 7 of the line"),
      tsv("TSV only blank lines", "\n  \n\t\r\n", "empty file: no label<TAB>text lines (3 blank lines)"),
      tsv("TSV no tab", "pos\tgood film\nneg bad film\n", "data.tsv:2: no tab"),
      tsv("TSV invalid UTF-8", "pos\tgood \xed\xa0\x80 film\n", "data.tsv:1: invalid UTF-8 at byte 10"),
      tsv("TSV empty label", "\tgood film\n", "data.tsv:1: empty label"),
      tsv("TSV empty text", "pos\t  \n", "data.tsv:1: empty text"),
      tsv("TSV CR-only line ends", "pos\tgood film\rneg\tbad film\r",
          "data.tsv:1: carriage return without a line feed at byte 14 of the line: CR-only line endings (classic Mac OS)"),
      tsv("TSV CR-only line ends after LF lines", "pos\tgood film\nneg\tbad\rpos\tfine\r",
          "data.tsv:2: carriage return without a line feed at byte 8"),
      tsv("TSV stray CR inside a text", "pos\tgood\rfilm\r\n", "data.tsv:1: carriage return without a line feed at byte 9"),
      Case{"missing file", "nowhere.tsv", [](const std::string&) {},
           [](const std::string& folder) { read_tsv(folder + "/nowhere.tsv"); },
           "cannot open: No such file or directory"},
      directory("TSV is a directory", "data.tsv", read_data),
      directory("vocab is a directory", "vocab.txt", read_vocab),
      directory("config is a directory", "config.json", read_config),
      device("TSV is a device", read_data),
      device("config is a device", read_config),
      device("safetensors is a device", read_safetensors),
      sparse("TSV over 1 GiB", "data.tsv", kTsvLimit.bytes + 1, read_data,
             "1073741825 bytes is too large: the limit for a TSV data file is 1024 MiB"),
      sparse("config over 16 MiB", "config.json", kJsonFileLimit.bytes + 1, read_config,
             "the limit for a JSON settings file is 16 MiB"),
      sparse("labels over 256 MiB", "labels.txt", kTokenListLimit.bytes + 1, read_label_file,
             "the limit for a vocabulary or label list is 256 MiB"),
      sparse("safetensors over 4 GiB", "model.safetensors", kSafetensorsLimit.bytes + 1, read_safetensors,
             "the limit for a safetensors file is 4096 MiB"),
  });
}

TEST_CASE("hostile files: a FIFO is read once, to its end") {
  TempDir dir("tapegrad_test_hostile");
  const std::string fifo = dir / "data.tsv";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::thread writer([&] { std::ofstream(fifo) << "pos\tgood film\nneg\tbad film\n"; });
  const LabelledData data = read_tsv(fifo);
  writer.join();
  REQUIRE(data.examples.size() == 2);
  CHECK(data.examples[1].text == "bad film");
}

TEST_CASE("hostile files: optimizer.safetensors that does not fit the optimizer") {
  const auto state_with = [](std::function<void(nn::NamedTensors&)> edit) {
    return [edit](const std::string& folder) {
      nn::NamedTensors state = load_safetensors(base_checkpoint() + "/optimizer.safetensors").tensors;
      edit(state);
      save_safetensors(folder + "/optimizer.safetensors", state);
    };
  };
  const auto load_into_adam = [](const std::string& folder) {
    OptimizerFixture fixture;
    load_optimizer_state(fixture.optimizer, folder + "/optimizer.safetensors");
  };
  const auto entry = [](nn::NamedTensors& state, const std::string& name) -> Tensor& {
    for (auto& [n, t] : state)
      if (n == name) return t;
    throw std::logic_error("no entry " + name);
  };
  run_cases({
      Case{"optimizer missing and unexpected state", "optimizer.safetensors", state_with([&](nn::NamedTensors& s) {
             s.erase(s.begin() + 1);  // step.embed.weight
             s.emplace_back("momentum_buffer.head.bias", zeros({2}));
           }),
           load_into_adam,
           "Adam load_state: 1 missing ('step.embed.weight' [1]), 1 unexpected ('momentum_buffer.head.bias' [2])"},
      Case{"optimizer wrongly shaped state", "optimizer.safetensors",
           state_with([&](nn::NamedTensors& s) { entry(s, "exp_avg.head.weight") = zeros({4, 2}); }), load_into_adam,
           "1 wrongly shaped ('exp_avg.head.weight': given [4,2], expected [2,4])"},
      Case{"optimizer F64 state into float32", "optimizer.safetensors",
           state_with([&](nn::NamedTensors& s) { entry(s, "exp_avg_sq.head.bias") = zeros({2}, DType::float64); }),
           load_into_adam, "'exp_avg_sq.head.bias' is float64, expected float32"},
      Case{"optimizer negative step count", "optimizer.safetensors",
           state_with([&](nn::NamedTensors& s) { entry(s, "step") = tensor({-3.0}, DType::float64); }), load_into_adam,
           "'step' must be a non-negative integer count, got -3"},
  });
}

TEST_CASE("hostile files: trainer.json options through train --resume, and bad files through the command line") {
  TrainOptions saved;
  saved.model = tiny_options();
  const json good = {{"format", "tapegrad-trainer-1"}, {"options", to_json(saved)}};
  const auto trainer_json = [&](std::function<void(json&)> edit) {
    json state = good;
    edit(state["options"]);
    return state.dump();
  };
  TempDir dir("tapegrad_test_hostile_cli");
  const auto run_folder = [&](const std::string& name, const std::string& text) {
    const std::string folder = dir / name;
    fs::create_directories(folder);
    write(folder + "/trainer.json", text);
    return folder;
  };
  const std::pair<std::string, std::string> resumes[] = {
      {trainer_json([](json& o) { o["lr"] = "0.01"; }), "trainer.json: 'options.lr' must be a number, got \"0.01\""},
      {trainer_json([](json& o) { o["learning_rate"] = 0.1; }), "unknown key \"options.learning_rate\""},
      {trainer_json([](json& o) { o["model"]["d_model"] = 32.5; }), "'options.model.d_model' must be an integer"},
      {trainer_json([](json& o) { o["seed"] = -1; }), "'options.seed' must be a non-negative integer, got -1"},
      {trainer_json([](json& o) { o.erase("task"); }), "'options.task' is missing"},
      {trainer_json([](json& o) { o["task"]["symbol"] = 8; }), "unknown key \"options.task.symbol\""},
      {trainer_json([](json& o) { o["model"]["n_heads"] = 3; }), "'options.model': n_heads = 3 does not divide"},
      {trainer_json([](json& o) { o["threads"] = int64_t{1} << 40; }), "'options.threads' = 1099511627776 is outside"},
  };
  int k = 0;
  for (const auto& [text, problem] : resumes) {
    const std::string folder = run_folder("resume" + std::to_string(k++), text);
    INFO(problem);
    require_one_line_error(run_cli(dir, "train --resume " + quote(folder)), folder + "/trainer.json: ");
    require_one_line_error(run_cli(dir, "train --resume " + quote(folder)), problem);
  }

  // Whole bad files through the commands that read them.
  const std::string data_dir = dir / "a_directory.tsv";
  fs::create_directories(data_dir);
  const std::string nan_checkpoint = dir / "nan";
  fs::copy(base_checkpoint(), nan_checkpoint);
  nn::NamedTensors weights = base_weights();
  weights[0].second = full({6, 4}, std::nan(""));
  save_weights(nan_checkpoint, weights);
  const std::pair<std::string, std::string> commands[] = {
      {"train --data " + quote(data_dir) + " --out " + quote(dir / "run"), "a_directory.tsv: is a directory"},
      {"train --data /dev/zero --out " + quote(dir / "run"), "/dev/zero: is a device"},
      {"predict --checkpoint " + quote(nan_checkpoint) + " --text 'a b'", "tensor 'embed.weight' element 0 is nan"},
  };
  for (const auto& [args, problem] : commands) {
    INFO("tapegrad " << args);
    require_one_line_error(run_cli(dir, args), problem);
  }
}
