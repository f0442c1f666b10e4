never.csv -k 2 --method mle --regularize 0.5
