% An engineer's Octave session: a Gram matrix, least squares by normal equations, a Cholesky
% factor, a linear solve, complex products and a complex Gram matrix. Prints checksums.
rand("seed", 1); randn("seed", 1);
n = 600;
x = randn(n); y = randn(n, 1);
g = x' * x;                          % dsyrk
beta = g \ (x' * y);                 % dpotrf/dpotrs or dgetrf/dgetrs (dtrsm, dgemm)
r = chol(g + eye(n));                % dpotrf (dsyrk, dtrsm, dgemm)
p = x * x';                          % dsyrk
q = x * g;                           % dgemm
z = complex(randn(n), randn(n));
w = z * z;                           % zgemm
h = z' * z;                          % zherk
s = (z + z') \ ones(n, 1);           % zgetrf/zgetrs (ztrsm, zgemm)
printf("%.10e\n", [sum(beta); sum(r(:)); sum(p(:)); sum(q(:)); real(sum(w(:))); imag(sum(w(:)));
                   real(sum(h(:))); real(sum(s)); imag(sum(s))]);
