# Two layers of examples/models/fmnist_cnn.burst, measured at batches 8 and 16.
layer{"name":"conv1","op":"conv2d"}[8][1,28,28]  1.0 2.0 0.1 0.2
layer{"name":"conv1","op":"conv2d"}[16][1,28,28]  1.5 2.5 0.1 0.2
layer{"op":"linear","name":"fc2"}[16][128]  0.25 0.75
