games.csv -k 1 --method pagerank
