never_win.csv --all
