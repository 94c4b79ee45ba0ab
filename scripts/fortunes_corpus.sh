#!/bin/sh
# The fortunes corpus of the language-model examples and of scripts/lm_parity.py: every text file of Debian's
# `fortunes` package (/usr/share/games/fortunes, about 2.5 MB of English) concatenated in sorted order into
# OUT. Skipped: the .dat indexes (binary), the .u8 names (symlinks to the same texts) and anything else that
# is not a regular file or not valid UTF-8, so the corpus is the same bytes on every machine with the package.
#     scripts/fortunes_corpus.sh OUT [DIR]
set -eu
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 OUT [DIR]   (DIR: /usr/share/games/fortunes)" >&2
  exit 2
fi
out=$1
dir=${2:-/usr/share/games/fortunes}
if [ ! -d "$dir" ]; then
  echo "$0: no $dir: install Debian's fortunes package (apt-get install fortunes)" >&2
  exit 1
fi
tmp=$out.tmp.$$
trap 'rm -f "$tmp"' EXIT
: > "$tmp"
count=0
# LC_ALL=C: the same byte order of names everywhere; names hold no newlines (a Debian package's files).
for f in $(LC_ALL=C ls "$dir"); do
  path=$dir/$f
  case $f in *.dat|*.u8) continue ;; esac
  if [ -L "$path" ] || [ ! -f "$path" ]; then continue; fi
  # iconv fails on bytes that are not UTF-8; a NUL (valid UTF-8, but a binary file's mark) makes tr's copy
  # differ from the file.
  if ! iconv -f UTF-8 -t UTF-8 "$path" > /dev/null 2>&1; then continue; fi
  if ! tr -d '\000' < "$path" | cmp -s - "$path"; then continue; fi
  cat "$path" >> "$tmp"
  count=$((count + 1))
done
if [ "$count" -eq 0 ]; then
  echo "$0: no text files in $dir" >&2
  exit 1
fi
mv "$tmp" "$out"
trap - EXIT
echo "$out: $count files, $(wc -c < "$out") bytes" >&2
