/dev/zero -k 1
