#include "train/cli/predict_command.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "autograd/autograd.h"
#include "train/report/attention_map.h"
#include "train/data/batching.h"
#include "train/cli/checkpoint_outputs.h"
#include "train/cli/number_flags.h"
#include "train/io/read_file.h"
#include "train/io/text_lines.h"

namespace tapegrad::cli {

using nlohmann::json;

namespace {

/// predict's stdin: all of it (to the TSV data limit, so a pipe that never ends is refused rather than
/// held), read by the rules of every line reader (text_lines.h: BOM and CRLF accepted; invalid UTF-8, NUL
/// and CR-only line ends refused with the line). Blank lines are skipped, as in TSV data.
std::vector<std::string> texts_from_stdin() {
  std::string text;
  char chunk[1 << 16];
  while (std::cin.read(chunk, sizeof chunk) || std::cin.gcount() > 0) {
    if (text.size() + static_cast<uint64_t>(std::cin.gcount()) > kTsvLimit.bytes)
      throw IOError(cat("stdin: more than ", kTsvLimit.bytes, " bytes: the limit for the texts to classify is that of ",
                        kTsvLimit.kind, " (", kTsvLimit.bytes >> 20, " MiB)"));
    text.append(chunk, static_cast<size_t>(std::cin.gcount()));
  }
  std::vector<std::string> texts;
  for_each_line(text, "stdin", [&](int64_t, std::string_view line) {
    if (!split_words(line).empty()) texts.emplace_back(line);
  });
  return texts;
}

/// --text values must be texts a TSV line could hold: valid UTF-8 with at least one word. An empty text
/// would be classified as a lone unknown word, a prediction about nothing.
void check_texts(const std::vector<std::string>& texts) {
  for (size_t i = 0; i < texts.size(); ++i) {
    if (const size_t bad = find_invalid_utf8(texts[i]); bad != texts[i].size())
      throw ValueError(cat("--text number ", i + 1, ": invalid UTF-8 at byte ", bad + 1, " of the text"));
    if (split_words(texts[i]).empty())
      throw ValueError(cat("--text number ", i + 1, ": empty text (a text needs at least one word, as in TSV data)"));
  }
}

}  // namespace

void add_predict(CLI::App& app, PredictFlags& f) {
  auto* cmd = app.add_subcommand("predict", "Label and class probabilities of texts (from --text or one per line on stdin)");
  add_path_option(cmd, "--checkpoint", f.checkpoint, "Checkpoint directory (a run directory or its best/)")->required();
  cmd->add_option("--text", f.texts, "A text to classify (repeatable)");
  add_path_option(cmd, "--attention-svg", f.attention_svg, "Draw the attention weights of the first text as heatmaps into this SVG file");
  cmd->add_flag("--json", f.json, "One JSON object per text: label, probs, logits");
  cmd->callback([&f] {
    if (!f.attention_svg.empty()) {
      try {
        check_attention_map_path(f.attention_svg);
      } catch (const IOError& e) {
        throw ValueError(cat("--attention-svg ", e.what()));
      }
    }
    check_texts(f.texts);
    LoadedModel loaded = load_model_for_outputs(f.checkpoint, f.texts);
    const std::vector<std::string> texts = f.texts.empty() ? texts_from_stdin() : f.texts;
    if (texts.empty()) throw ValueError("no texts (give --text or lines on stdin)");
    const bool cls = nn::prepends_cls(loaded.options);
    const int64_t context = loaded.options.context_length;
    std::vector<std::vector<int64_t>> sequences;
    std::vector<bool> truncated;
    for (const std::string& text : texts) {
      bool cut = false;
      sequences.push_back(encode_text(text, loaded.vocab, context, cls, &cut));
      truncated.push_back(cut);
    }
    Tensor logits;  // (N, K)
    try {
      logits = classify(*loaded.model, sequences, evaluation_tokens_for(f.checkpoint, loaded.options.context_length));
    } catch (const NonFiniteOutput& e) {
      refuse_non_finite(e, f.checkpoint, loaded, "text");
    }
    // Probabilities from finite logits are finite: softmax subtracts the row's largest logit first.
    const std::vector<double> all_z = logits.to_vector(), all_p = softmax(logits, -1).to_vector();
    if (!f.attention_svg.empty()) {  // the first text alone, so that its heatmaps have no padding
      const int64_t panels = loaded.options.n_layers * loaded.options.n_heads,
                    limit = attention_map_token_limit(panels), T = static_cast<int64_t>(sequences[0].size());
      if (T > limit)
        throw ValueError(cat("--attention-svg ", f.attention_svg, ": text 1 has ", T, " tokens, more than the ", limit,
                             " an attention map of this model's ", loaded.options.n_layers, " layers x ",
                             loaded.options.n_heads, " heads draws (", kAttentionMapCells,
                             " cells at most); put a shorter text first"));
      NoGradGuard no_grad;
      const PaddedIds first = pad_sequences(sequences, std::vector<int64_t>{0});
      std::vector<Tensor> attention;
      loaded.model->forward(first.ids, first.key_padding_mask, &attention);
      // An attention without a (T, T) matrix (linear attention) returns no weights: say which, not "undefined".
      for (const Tensor& w : attention)
        if (!w.defined())
          throw ValueError(cat("predict --attention-svg: this model's attention '", loaded.options.attention,
                               "' computes no (T, T) attention weights, so there are no heatmaps to draw"));
      std::vector<std::string> tokens;
      for (int64_t id : sequences[0]) tokens.push_back(loaded.vocab.token(id));
      write_attention_svg(f.attention_svg, tokens, attention, "attention: " + texts[0]);
    }
    const size_t K = loaded.labels.size();
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::vector<double> z(all_z.begin() + i * K, all_z.begin() + (i + 1) * K),
          p(all_p.begin() + i * K, all_p.begin() + (i + 1) * K);
      const size_t best = std::max_element(p.begin(), p.end()) - p.begin();
      if (f.json) {
        json probs = json::object(), logit = json::object();
        for (size_t c = 0; c < p.size(); ++c) {
          probs[loaded.labels[c]] = p[c];
          logit[loaded.labels[c]] = z[c];
        }
        std::cout << json{{"text", texts[i]}, {"label", loaded.labels[best]}, {"probs", probs}, {"logits", logit}}.dump()
                  << std::endl;
      } else {
        std::printf("%s\t", loaded.labels[best].c_str());
        for (size_t c = 0; c < p.size(); ++c) std::printf("%s%s=%.4f", c ? " " : "", loaded.labels[c].c_str(), p[c]);
        std::printf("\t%s\n", texts[i].c_str());
      }
      if (truncated[i]) std::fprintf(stderr, "note: text %zu was cut to the context length %lld\n", i + 1,
                                     static_cast<long long>(context));
    }
    if (!f.attention_svg.empty()) std::fprintf(stderr, "attention heatmaps: %s\n", f.attention_svg.c_str());
  });
}

}  // namespace tapegrad::cli
