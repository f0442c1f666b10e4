layer{"name":"conv1","op":"conv2d"}[8][1,28,28]  1.0
layer{"op":"conv2d"}[8][1,28,28]  1.0 2.0
layer{"name":"conv1","op":"conv2d"}[8][1,28,28]  1.0 2.0 3.0
layer{"name":"conv1","op":"conv2d"}[8][1,28,28]  1.0 -2.0
layer{"name":"fc1","op":"linear"}[8][3136]  1.0 2.0
layer{"name":"fc1","op":"relu"}[8][3136]  1.0 2.0
