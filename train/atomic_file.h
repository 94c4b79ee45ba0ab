#pragma once
// Every file tapegrad writes for later (checkpoints, metrics.csv, vocab.txt, the SVG pictures) is
// written atomically and durably: the bytes go to path + ".tmp", which is fsynced and renamed over path,
// and then the folder is fsynced, so a crash or a kill at any moment leaves the old file or the new one
// whole, never a mix. A failure removes the .tmp at once (a full disk gets its space back) and is an
// IOError naming the file and errno's text: "out/model.safetensors.tmp: write failed: File too large".
#include <span>
#include <string>
#include <string_view>

namespace tapegrad {

/// Writes the pieces, one after another, as the new contents of path (atomically, see above). Pieces
/// spare a large writer the copy into one buffer: safetensors passes its header and each tensor's bytes.
void write_file_atomic(const std::string& path, std::span<const std::string_view> pieces);
/// Writes bytes as the new contents of path (atomically, see above).
void write_file_atomic(const std::string& path, std::string_view bytes);

/// fsync of a file or folder by path: the bytes (or the folder's entries) reach the disk.
void fsync_path(const std::string& path);

}  // namespace tapegrad
