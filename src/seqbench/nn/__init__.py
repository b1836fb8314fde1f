"""Pure-torch building blocks (no Lightning): recurrent cells, attention, positions, blocks.

Each fast path (cuDNN `nn.LSTM`, `F.scaled_dot_product_attention`) sits beside a readable reference
written from the textbook equations, and the tests check that the two agree numerically.
"""
