many_errors.csv -k 1
