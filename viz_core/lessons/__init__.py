"""The lessons' maths, one module a concept a page teaches: mechanics (Q, K, V, masks, softmax, MHA / MQA / GQA),
scaling (softmax saturation and 1/sqrt(d_k)), positional and position_demos (sinusoidal encodings and what they make
possible), optimizers, surfaces and schedules (optimizer trajectories), blocks and anatomy (the blocks around
attention). Each returns numpy arrays; the figures are drawn by viz_core.plots."""
