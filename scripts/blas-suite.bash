# netlib's Level-3 programs over a BLAS with libtilemm_blas.so preloaded, for scripts/test-blas
# (here) and scripts/gpu-check blas (on a lent GPU machine). Sourced; the caller sets lib (the
# library), work (a folder for the reports), BLAS_TESTS (the programs and their input files) and
# programs (another such folder for this run, optional), and reads failed after its runs.
failed=0

fail() {
  echo "test-blas: FAILED: $*" >&2
  failed=1
}

# The routines of each type letter, as the programs' input files list them.
routines() {
  case $1 in
    s | d) echo gemm symm trmm trsm syrk syr2k ;;
    c | z) echo gemm hemm symm trmm trsm herk syrk her2k syr2k ;;
  esac
}

# shortened FROM DIR: the eight input files of folder FROM in DIR with fewer sizes (N in 0 1 2 9
# for the Fortran programs, 1 2 9 for the CBLAS ones, which take no 0), every routine, transpose,
# α and β kept: for the GPU runs, where lavapipe takes about a millisecond a call.
shortened() {
  local from=$1 dir=$2 p
  mkdir -p "$dir"
  for p in s d c z; do
    sed -e 's/^6 *NUMBER OF VALUES OF N/4                 NUMBER OF VALUES OF N/' \
      -e 's/^0 1 2 3 5 9 *VALUES OF N/0 1 2 9             VALUES OF N/' \
      "$from/${p}blat3.in" > "$dir/${p}blat3.in"
    sed -e 's/^6 *NUMBER OF VALUES OF N/3                 NUMBER OF VALUES OF N/' \
      -e 's/^1 2 3 5 7 9 *VALUES OF N/1 2 9               VALUES OF N/' \
      "$from/${p}in3" > "$dir/${p}in3"
    grep -q '^4 .*NUMBER OF VALUES OF N' "$dir/${p}blat3.in" && grep -q '^3 .*NUMBER OF VALUES OF N' "$dir/${p}in3" \
      || fail "shortened: $from/${p}blat3.in or ${p}in3 is not as expected"
  done
}

# run NAME MODE [VAR=VALUE…]: the eight programs of $programs (default: over the system BLAS) with
# the preload, in MODE, on the input files of $inputs (default: the programs' own); their reports
# and the log are left in $work/NAME.
run() {
  local name=$1 mode=$2
  shift 2
  local dir="$work/$name"
  mkdir -p "$dir"
  local BLAS_TESTS="${programs:-$BLAS_TESTS}"
  local in="${inputs:-$BLAS_TESTS}"
  local p start=$SECONDS
  for p in s d c z; do
    # The Fortran programs write their report to ${p}blat3.out in the working directory.
    (cd "$dir" && env "$@" LD_PRELOAD="$lib" TILEMM_BLAS="$mode" TILEMM_BLAS_LOG="$dir/calls.log" \
      "$BLAS_TESTS/xblat3$p" < "$in/${p}blat3.in" > "$dir/xblat3$p.stdout" 2>&1) \
      || fail "$name: xblat3$p exited $?"
    (cd "$dir" && env "$@" LD_PRELOAD="$lib" TILEMM_BLAS="$mode" TILEMM_BLAS_LOG="$dir/calls.log" \
      "$BLAS_TESTS/x${p}cblat3" < "$in/${p}in3" > "$dir/x${p}cblat3.out" 2>&1) \
      || fail "$name: x${p}cblat3 exited $?"
  done
  local reports=("$dir/sblat3.out" "$dir/dblat3.out" "$dir/cblat3.out" "$dir/zblat3.out"
    "$dir/xscblat3.out" "$dir/xdcblat3.out" "$dir/xccblat3.out" "$dir/xzcblat3.out")
  if grep -HnE 'FAIL|SUSPECT|FATAL' "${reports[@]}" "$dir"/*.stdout; then
    fail "$name: the suite reports the failures above"
  fi
  # Each program must have run every routine's tests to the end: error exits, then computations
  # (the CBLAS programs once per layout).
  local report routine letter r
  for report in "${reports[@]}"; do
    case "$report" in
      */x?cblat3.out) letter=$(basename "$report" | cut -c2) ;;
      *) letter=$(basename "$report" | cut -c1) ;;
    esac
    for r in $(routines "$letter"); do
      local passed expected
      case "$report" in
        */x?cblat3.out) routine="cblas_$letter$r " expected=3 ;;
        *) routine="$(tr a-z A-Z <<< "$letter$r") " expected=2 ;;
      esac
      passed=$(grep -c "^ *$routine *PASSED THE" "$report" || true)
      [ "$passed" -eq "$expected" ] \
        || fail "$name: $(basename "$report") has $passed of $expected '${routine% } PASSED' lines"
    done
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

# only_gpu NAME: every call of run NAME took the GPU route, none failed, f64 ones too, and every
# routine of every type ran GEMMs there, in its Fortran and its CBLAS form.
only_gpu() {
  local log="$work/$1/calls.log"
  if grep -m 3 -E 'route=(cpu|blas) |failed' "$log"; then
    fail "$1: calls above did not take the GPU route"
  fi
  grep -q 'route=gpu ' "$log" || fail "$1: no call took the GPU route"
  local p r symbol
  for p in s d c z; do
    for r in $(routines "$p"); do
      for symbol in "${p}${r}_ " "cblas_${p}${r}(col-major) " "cblas_${p}${r}(row-major) "; do
        grep -qE "^${symbol//[()]/.}.*route=gpu .*(gemms=[1-9]|kernel=)" "$log" \
          || fail "$1: no ${symbol% } call ran a GEMM on the GPU route"
      done
    done
  done
}
