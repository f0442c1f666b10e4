#!/bin/sh
# mpi_single_complete.sh "OBJECTS": the shared runtime compiled against the one-rank MPI
# stand-in (runtime/cuda/mpi_single), and the stand-in itself, as one ;-separated list.
# Every MPI function the shared code calls must be defined by the stand-in, or the GPU
# machine's one-rank build (scripts/gpu-check) fails to link. Runs without a GPU.
objs=$(echo "$1" | tr ';' ' ')
stand_in=
for o in $objs; do
    case $o in *mpi_single.c.o) stand_in=$o ;; esac
done
if [ -z "$stand_in" ]; then
    echo "no mpi_single object among: $objs"
    exit 2
fi
called=$(nm -u $objs 2> /dev/null | sed -n 's/^ *U \(P\{0,1\}MPI_[A-Za-z_]*\)$/\1/p' | sort -u)
defined=$(nm -g --defined-only "$stand_in" | sed -n 's/.* T \(MPI_[A-Za-z_]*\)$/\1/p' | sort -u)
missing=0
for f in $called; do
    if ! echo "$defined" | grep -qx "$f"; then
        echo "the one-rank MPI stand-in (mpi_single.c) lacks $f, which the runtime calls"
        missing=1
    fi
done
[ -n "$called" ] || { echo "no MPI calls found in the objects: the check reads nothing"; exit 2; }
[ $missing -eq 0 ] && echo "mpi_single.c defines the $(echo "$called" | wc -w) MPI functions the runtime calls"
exit $missing
