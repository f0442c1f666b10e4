never.csv -k 2 --method mle
