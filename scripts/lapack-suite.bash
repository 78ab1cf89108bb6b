# LAPACK's own tests (Debian's liblapack-test): sourced by scripts/test-lapack.
# lapack_programs LETTERS: "PROGRAM INPUT" lines (INPUT: a name in $LAPACK_TESTS, or a path), as
# LAPACK's lapack_testing.py runs them, for the precisions given (s, d, c, z): the eigenvalue
# programs on their 16 inputs, the linear-equation programs, the mixed-precision ones (d, z) and
# the RFP one.
lapack_programs() {
  local l
  for l in "$@"; do
    local input
    for input in nep sep se2 svd ${l}ec ${l}ed ${l}gg ${l}gd ${l}sb ${l}sg ${l}bb glm gqr gsv csd lse; do
      echo "xeigtst$l $input"
    done
    echo "xlintst$l ${l}test"
    [ "$l" = d ] && echo "xlintstds dstest"
    [ "$l" = z ] && echo "xlintstzc zctest"
    echo "xlintstrf$l ${l}test_rfp"
  done
}

# lapack_summary OUT: the lines of a program's report that state its outcome: tests run, tests
# that failed the threshold (with the routine and test), illegal and INFO errors.
lapack_summary() {
  grep -E 'out of|passed the threshold|tests run|[Ii]llegal| INFO|failed|FAIL' "$1" \
    | sed -E 's/[[:space:]]+/ /g' || true
}

# lapack_reduced DIR LETTERS…: inputs for the GPU's reduced set in the precisions given (d, s, z,
# c), cut from Debian's into DIR (a section runs from its header to the next one's, "XYZ   Data
# ..."): the expert nonsymmetric eigenvalue driver alone (DVX, ZVX …: all 21 matrix types and the
# precomputed matrices, sizes 0 1 2 5 10) and the generalized eigenvalue driver alone (DGV, ZGV …:
# sizes 2 6 10), whose test 5 compares eigenvalues computed with and without eigenvectors bit for
# bit. Prints their "PROGRAM INPUT" lines.
lapack_reduced() {
  local dir=$1 l U
  shift
  for l in "$@"; do
    U=$(tr a-z A-Z <<< "$l")
    awk -v s="^${U}VX " '$0 ~ s {on=1; print; next} /^[A-Z][A-Z][A-Z] +Data/ {on=0} on' "$LAPACK_TESTS/${l}ed.in" \
      | sed -e '2s/.*/5                 Number of matrix dimensions/' \
        -e '3s/.*/0 1 2 5 10        Matrix dimensions/' > "$dir/${l}vx.in"
    awk -v s="^${U}GV " '$0 ~ s {on=1; print; next} /^[A-Z][A-Z][A-Z] +Data/ {on=0} on' "$LAPACK_TESTS/${l}gd.in" \
      | sed -e '2s/.*/3                 Number of matrix dimensions/' \
        -e '3s/.*/2 6 10            Matrix dimensions/' > "$dir/${l}gv.in"
    echo "xeigtst$l $dir/${l}vx"
    echo "xeigtst$l $dir/${l}gv"
  done
}

# lapack_routes LOG: the preload's log as counts of "ENTRY route=ROUTE" (ENTRY the symbol, ROUTE
# gpu, cpu, blas or none, "failed" after it where the route failed).
lapack_routes() {
  awk '{ r = ""; for (i = 2; i <= NF; i++) if ($i ~ /^route=/) { r = $i; if ($(i + 1) == "failed") r = r "-failed"; break }
         if (r != "") n[$1 " " r]++ }
       END { for (k in n) print n[k], k }' "$1"
}

# lapack_total ROUTES: the counts of lapack_routes added up, one line per (entry, route).
lapack_total() {
  [ -f "$1" ] || return 0
  awk '{ n[$2 " " $3] += $1 } END { for (k in n) print n[k], k }' "$1" | sort -k2
}
