games.csv -k 3 --method spectral-mle
