# netlib's Level-3 programs over a BLAS with libtilemm_blas.so preloaded, for scripts/test-blas
# (here) and scripts/gpu-check blas (on a lent GPU machine). Sourced; the caller sets lib (the
# library), work (a folder for the reports), BLAS_TESTS (the programs and their input files) and
# programs (another such folder for this run, optional), and reads failed after its runs.
failed=0

fail() {
  echo "test-blas: FAILED: $*" >&2
  failed=1
}

# run NAME MODE [VAR=VALUE…]: the eight programs of $programs (default: over the system BLAS) with
# the preload, in MODE; their reports and the log are left in $work/NAME.
run() {
  local name=$1 mode=$2
  shift 2
  local dir="$work/$name"
  mkdir -p "$dir"
  local BLAS_TESTS="${programs:-$BLAS_TESTS}"
  local p start=$SECONDS
  for p in s d c z; do
    # The Fortran programs write their report to ${p}blat3.out in the working directory.
    (cd "$dir" && env "$@" LD_PRELOAD="$lib" TILEMM_BLAS="$mode" TILEMM_BLAS_LOG="$dir/calls.log" \
      "$BLAS_TESTS/xblat3$p" < "$BLAS_TESTS/${p}blat3.in" > "$dir/xblat3$p.stdout" 2>&1) \
      || fail "$name: xblat3$p exited $?"
    (cd "$dir" && env "$@" LD_PRELOAD="$lib" TILEMM_BLAS="$mode" TILEMM_BLAS_LOG="$dir/calls.log" \
      "$BLAS_TESTS/x${p}cblat3" < "$BLAS_TESTS/${p}in3" > "$dir/x${p}cblat3.out" 2>&1) \
      || fail "$name: x${p}cblat3 exited $?"
  done
  local reports=("$dir/sblat3.out" "$dir/dblat3.out" "$dir/cblat3.out" "$dir/zblat3.out"
    "$dir/xscblat3.out" "$dir/xdcblat3.out" "$dir/xccblat3.out" "$dir/xzcblat3.out")
  if grep -HnE 'FAIL|SUSPECT|FATAL' "${reports[@]}" "$dir"/*.stdout; then
    fail "$name: the suite reports the failures above"
  fi
  # Each program must have run its GEMM tests to the end: error exits, then computations (the
  # CBLAS programs once per layout).
  local report routine
  for report in "${reports[@]}"; do
    case "$report" in
      */x?cblat3.out) routine="cblas_$(basename "$report" | cut -c2)gemm " ;;
      *) routine="$(basename "$report" | cut -c1 | tr a-z A-Z)GEMM " ;;
    esac
    local passed
    passed=$(grep -c "$routine *PASSED THE" "$report" || true)
    local expected=2
    case "$report" in */x?cblat3.out) expected=3 ;; esac
    [ "$passed" -eq "$expected" ] \
      || fail "$name: $(basename "$report") has $passed of $expected '${routine% } PASSED' lines"
  done
  local products
  products=$(grep -cE 'route=(gpu|cpu|blas) ' "$dir/calls.log" || true)
  echo "test-blas: $name (TILEMM_BLAS=$mode $*): the eight programs ran in $((SECONDS - start)) s;" \
    "$products products: $(grep -oE 'route=(gpu|cpu|blas)( failed)?' "$dir/calls.log" \
    | sort | uniq -c | tr -s ' \n' ' ')" >&2
  [ "$products" -gt 0 ] || fail "$name: no product was logged"
  # The error exits reached the programs through xerbla_ and cblas_xerbla, and were logged.
  grep -q 'refused: parameter 13 is wrong (reported through xerbla_)' "$dir/calls.log" \
    || fail "$name: no refusal of LDC through xerbla_ in the log"
  grep -q 'refused: parameter 1 is wrong (Illegal layout' "$dir/calls.log" \
    || fail "$name: no refusal of the layout through cblas_xerbla in the log"
}

# only_gpu NAME: every product of run NAME took the GPU route, none failed, f64 ones too.
only_gpu() {
  local log="$work/$1/calls.log"
  if grep -m 3 -E 'route=(cpu|blas) |failed' "$log"; then
    fail "$1: calls above did not take the GPU route"
  fi
  grep -q 'route=gpu ' "$log" || fail "$1: no call took the GPU route"
  local p
  for p in s d c z; do
    grep -qE "^(${p}gemm_|cblas_${p}gemm).*route=gpu " "$log" \
      || fail "$1: no ${p}gemm call took the GPU route"
  done
}
