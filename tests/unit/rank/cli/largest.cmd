disconnected.csv -k 2 --largest-component
