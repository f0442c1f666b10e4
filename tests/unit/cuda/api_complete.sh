#!/bin/sh
# api_complete.sh LIB HEADER: every function that burstrt.h declares must be defined in
# the CUDA backend's static library, so that any generated program links against it.
# Catches an API addition made to the CPU backend only (static inline helpers such as
# rt_f32 are not library symbols and are skipped). Runs without a GPU.
lib=$1
header=$2
missing=0
for f in $(sed -n 's/^[A-Za-z_][A-Za-z0-9_ *]*[ *]\(rt_[a-z0-9_]*\)(.*/\1/p' "$header" | sort -u); do
    if grep -q "static inline [a-z0-9_ *]*[ *]$f(" "$header"; then
        continue
    fi
    if ! nm -g --defined-only "$lib" 2> /dev/null | grep -q " T $f\$"; then
        echo "burstrt_cuda lacks $f, which burstrt.h declares"
        missing=1
    fi
done
[ $missing -eq 0 ] && echo "burstrt_cuda defines every function of burstrt.h"
exit $missing
