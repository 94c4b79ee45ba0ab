#pragma once
// Every file tapegrad writes for later (checkpoints, metrics.csv, vocab.txt, the SVG pictures) is
// written atomically and durably: the bytes go to path + ".tmp", which is fsynced and renamed over path,
// and then the folder is fsynced, so a crash, a kill or a power cut at any moment leaves the old file or
// the new one whole, never a mix or an empty file. A failure removes the .tmp at once (a full disk gets
// its space back) and is an IOError naming the file and errno's text:
// "out/model.safetensors.tmp: write failed: File too large".
//
// Nothing is written through a symbolic link (a run folder from elsewhere is hostile input): a leftover
// .tmp, link or not, is unlinked and the .tmp created afresh (O_EXCL | O_NOFOLLOW), and a link at the
// final name is replaced by the rename, never followed; its target keeps its bytes.
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

/// Creates the folder path and its missing parents, fsyncing each new folder's parent before going
/// deeper, so that a power cut cannot lose a folder whose contents were synced. True when path itself
/// was created, false when it was a folder already; IOError naming the path otherwise.
bool create_directories_durably(const std::string& path);

/// What require_own_entry expects at a name: a regular file or a folder.
enum class EntryKind { file, folder };
/// IOError when path is a symbolic link or exists as anything but `expected` -- "runs/x/.lock: is a
/// symbolic link; tapegrad never writes through links in a run folder: remove it" -- so that a name
/// tapegrad writes through is never one a run folder from elsewhere planted. Nothing there is fine.
void require_own_entry(const std::string& path, EntryKind expected);

}  // namespace tapegrad
