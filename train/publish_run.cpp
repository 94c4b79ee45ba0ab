#include "train/publish_run.h"

#include <filesystem>

#include "train/checkpoint/checkpoint.h"
#include "train/report/metrics.h"
#include "train/report/curves.h"

namespace tapegrad {

std::string kept_checkpoint(const Run& run) {
  const int64_t published = run.progress.published_step;
  if (published < 0) return cat("no checkpoint was saved yet in ", run.options.out);
  return cat("the checkpoint of step ", published, " in ", run.options.out, " is intact");
}

ValueError diverged(const Run& run, int64_t step, const std::string& what) {
  const int64_t published = run.progress.published_step;
  const std::string kept = published < 0 ? cat("no checkpoint was saved in ", run.options.out)
                                         : cat("the last good checkpoint (step ", published, ") is kept in ", run.options.out);
  return ValueError(cat("training diverged at step ", step, " (", what, "): stopped; ", kept, "; lower --lr or set --clip-grad ",
                        "(--detect-anomaly names the op that made the first NaN or Inf)"));
}

void publish_step(Run& run, bool is_best, double elapsed) {
  const TrainOptions& o = run.options;
  if (const std::string bad = first_non_finite(run.model->module().named_parameters()); !bad.empty())
    throw diverged(run, run.progress.step, cat("parameter ", bad, " after the update"));
  try {
    // metrics.csv first: a kill before the publish leaves rows that resume drops (it keeps the rows up
    // to the checkpoint's step); the other order would lose them for good.
    write_metrics_csv(o.out + "/metrics.csv", run.progress.metrics);
    write_curves_svg(o.out + "/curves.svg", run.progress.metrics, "tapegrad: " + (o.data.empty() ? o.task.name : o.data));
    const bool language_model = run.data.tokenizer.has_value();
    CheckpointContents contents{&run.model->module(),
                                run.model->config(),
                                language_model ? nullptr : &run.data.vocab,
                                language_model ? nullptr : &run.data.labels,
                                run.optimizer.get(),
                                run.trainer_state(elapsed),
                                language_model ? &*run.data.tokenizer : nullptr};
    publish_checkpoint(o.out, run.progress.step, contents, is_best);
  } catch (const IOError& e) {
    throw IOError(cat(e.what(), "; ", kept_checkpoint(run)));
  } catch (const std::filesystem::filesystem_error& e) {  // the links and folders of publish_checkpoint
    throw IOError(cat(e.what(), "; ", kept_checkpoint(run)));
  }
  run.progress.published_step = run.progress.step;
}

}  // namespace tapegrad
