# fmnist_cnn's conv1 and fc1 with the input x and the optimizer's update
# (421,642 parameters: fc1 has 401,536 of them, conv1 320).
layer{"name":"x","op":"input"}[16][]  0.5 0
layer{"name":"y","op":"input"}[16][]  0.25 0
layer{"name":"conv1","op":"conv2d"}[16][1,28,28]  1.5 2.5
layer{"name":"fc1","op":"linear"}[16][3136]  1.0 1.0
optimizer{"op":"sgd","params":421642}[16][]  4.21642
