#!/usr/bin/env bash
# Checks that gpumem's shipped binaries load on every x86_64 Linux with glibc 2.28 or later (the
# manylinux_2_28 baseline: RHEL 8, Ubuntu 20.04, Debian 10): a failure names each offending symbol.
#   bash native/scripts/check-glibc.sh                # build/Release/gpumem.node, and libgpumem_torch.so when built
#   bash native/scripts/check-glibc.sh FILE...        # the given shared objects
# A binary passes when, in its dynamic section (objdump -T, -p):
#   - no symbol needs a glibc version newer than GLIBC_2.28;
#   - no symbol needs libstdc++ (GLIBCXX_*, CXXABI_*): it is linked statically;
#   - libgcc_s versions are at most GCC_7.0.0 (what manylinux_2_28 allows);
#   - it needs only libc, libm, libdl, libpthread, librt, libgcc_s and the loader;
#   - every other undefined symbol is versioned or weak, except Node-API's (napi_*, node_api_*),
#     which Node.js provides: an unversioned one is a libc function the link did not find.
# Then, where a portable build extracted glibc 2.17 (build/glibc-sysroot), each binary is loaded by
# load-old-glibc.c under glibc 2.17's own loader, libc and libgcc_s (and the torch library answers a
# configuration query): the load itself, not only the symbol tables, on a glibc older than 2.28.
# cmake/portable.cmake says how the build achieves it; `npm test -w native` runs this check.
set -euo pipefail

native_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
max_glibc="2.28"
max_gcc="7.0.0"
allowed_needed="libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libgcc_s.so.1 ld-linux-x86-64.so.2"

if ! command -v objdump >/dev/null; then
  echo "check-glibc: objdump is not on PATH (apt-get install binutils)" >&2
  exit 2
fi

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  files=("$native_dir/build/Release/gpumem.node")
  [ -f "$native_dir/build/Release/libgpumem_torch.so" ] && files+=("$native_dir/build/Release/libgpumem_torch.so")
fi

# version_gt A B: true when version A sorts after version B.
version_gt() { [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -1)" = "$1" ]; }

failed=0
for file in "${files[@]}"; do
  if [ ! -f "$file" ]; then
    echo "check-glibc: FAIL $file: no such file (build it first: npm run build -w native)"
    failed=1
    continue
  fi
  if ! symbols="$(objdump -T "$file" 2>&1)" || ! headers="$(objdump -p "$file" 2>&1)"; then
    echo "check-glibc: FAIL $file: objdump cannot read it: ${symbols}${headers}"
    failed=1
    continue
  fi
  problems=()
  # Undefined dynamic symbols as "flags version name" (the version column is "(GLIBC_2.14)",
  # "GLIBC_2.14" or "Base"/"*UND*"-only when unversioned).
  undefined="$(awk '$0 ~ /\*UND\*/ {
      weak = ($2 == "w") ? "w" : "-";
      version = ""; name = $NF;
      for (i = 1; i <= NF; i++) if ($i ~ /^\(?(GLIBC|GLIBCXX|CXXABI|GCC)_[0-9.]+\)?$/) { version = $i; gsub(/[()]/, "", version) }
      print weak, (version == "" ? "-" : version), name
    }' <<<"$symbols")"
  max_seen_glibc="2.2.5"
  while read -r weak version name; do
    [ -z "$name" ] && continue
    case "$version" in
      GLIBC_*)
        v="${version#GLIBC_}"
        if version_gt "$v" "$max_glibc"; then problems+=("$name needs $version (newer than GLIBC_$max_glibc)"); fi
        if version_gt "$v" "$max_seen_glibc"; then max_seen_glibc="$v"; fi
        ;;
      GLIBCXX_* | CXXABI_*) problems+=("$name needs $version: libstdc++ must be linked statically") ;;
      GCC_*)
        if version_gt "${version#GCC_}" "$max_gcc"; then problems+=("$name needs $version (newer than GCC_$max_gcc)"); fi
        ;;
      -)
        case "$name" in
          napi_* | node_api_*) ;;
          *) [ "$weak" = "w" ] || problems+=("$name is undefined and unversioned: the link bound it to no library") ;;
        esac
        ;;
    esac
  done <<<"$undefined"
  needed="$(awk '$1 == "NEEDED" { print $2 }' <<<"$headers" | tr '\n' ' ')"
  for lib in $needed; do
    case " $allowed_needed " in
      *" $lib "*) ;;
      *) problems+=("needs $lib, which is not part of every glibc system") ;;
    esac
  done
  if [ ${#problems[@]} -gt 0 ]; then
    echo "check-glibc: FAIL $file:"
    printf '%s\n' "${problems[@]}" | sort -u \
      | awk '/needs GLIBC_/ { glibc[g++] = $0; next } { other[o++] = $0 }
             END { for (i = 0; i < g; i++) line[n++] = glibc[i]; for (i = 0; i < o; i++) line[n++] = other[i]
                   for (i = 0; i < n && i < 12; i++) print "  " line[i]; if (n > 12) print "  ... and " n - 12 " more" }'
    failed=1
  else
    echo "check-glibc: ok $file: glibc $max_seen_glibc at most, no GLIBCXX/CXXABI; needs ${needed% }"
  fi
done

sysroot="$native_dir/build/glibc-sysroot/x86_64-unknown-linux-gnu/sysroot"
if [ "$failed" -ne 0 ]; then
  exit 1
elif [ ! -x "$sysroot/lib/ld-linux-x86-64.so.2" ]; then
  echo "check-glibc: load test skipped: no glibc 2.17 in $native_dir/build/glibc-sysroot (a portable build extracts it)"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The loader program is compiled with this machine's headers and linked against glibc 2.17 (-B: its
# start files too), as the binaries are.
cc -O1 -c -o "$work/load-old-glibc.o" "$native_dir/scripts/load-old-glibc.c"
cc -o "$work/load-old-glibc" "$work/load-old-glibc.o" \
  --sysroot="$sysroot" -B"$sysroot/usr/lib/" -L"$sysroot/usr/lib" -L"$sysroot/lib" -ldl
"$sysroot/lib/ld-linux-x86-64.so.2" --library-path "$sysroot/lib" "$work/load-old-glibc" "${files[@]}"
