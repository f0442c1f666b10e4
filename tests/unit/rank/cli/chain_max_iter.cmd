chain.csv -k 3 --max-iter 50
