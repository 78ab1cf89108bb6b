# A statistician's session: a Gram matrix, a regression by normal equations, a Cholesky factor,
# products, a complex product. Prints checksums.
set.seed(1)
n <- 600
x <- matrix(rnorm(n * n), n)
y <- rnorm(n)
g <- crossprod(x)                 # dsyrk
beta <- solve(g, crossprod(x, y)) # dgesv: dgetrf, dgetrs (dtrsm, dgemm)
r <- chol(g + diag(n))            # dpotrf (dsyrk, dtrsm, dgemm)
p <- x %*% t(x)                   # dgemm
z <- matrix(complex(real = rnorm(n * n), imaginary = rnorm(n * n)), n)
w <- z %*% z                      # zgemm
cat(sprintf("%.10e\n", c(sum(beta), sum(r), sum(p), Re(sum(w)), Im(sum(w)))))
