#!/bin/sh
# Every C++ file in the repository is as clang-format (the repo's .clang-format) writes it.
# Usage: check_format.sh SOURCE_DIR
set -eu
cd "$1"
if ! command -v clang-format >/dev/null 2>&1; then
  echo "check_format: clang-format is not installed (deploy/install-deps.sh installs it)" >&2
  exit 1
fi
if ! files=$(git ls-files '*.cc' '*.h') || [ -z "$files" ]; then
  echo "check_format: no C++ files from git ls-files in $1 (not a git checkout?)" >&2
  exit 1
fi
# shellcheck disable=SC2086
if ! clang-format --style=file --dry-run --Werror $files; then
  echo "check_format: run clang-format -i on the files above" >&2
  exit 1
fi
echo "check_format: $(echo "$files" | wc -l) files formatted"
