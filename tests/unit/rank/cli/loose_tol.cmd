games.csv -k 2 --tol 0.01
