#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds examples/embed as an outside project against
# it (find_package(tracer) and target_link_libraries(... tracer::tracer)), runs both hosts, then
# builds the C host again with pkg-config alone. Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/examples/embed" -B "$tmp/b" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/b" >/dev/null
export LD_LIBRARY_PATH="$tmp/prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$tmp/b/host_c" "$src/examples/embed/model.trace"
"$tmp/b/host_cpp" "$src/examples/embed/model.trace"
# pkg-config: the flags alone suffice for a C host
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
cc -std=c11 -o "$tmp/host_pc" "$src/examples/embed/host.c" $(pkg-config --cflags --libs tracer) -lm
"$tmp/host_pc" "$src/examples/embed/model.trace" | tail -1
# the installed program runs too
"$tmp/prefix/bin/tracer" run "$src/examples/embed/model.trace" --entry loss --passes grad | tail -1
echo "install test passed"
