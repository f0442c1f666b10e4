games.csv -k 3 --method=mle
