"""The host board: each worker's arrays of every tree, on which a pick of the commonest request is
weighed instead of searching every tree (``host_board``: the board and its views; ``on_board``: a
single pick planned and claimed on it; ``kept_weights``: a view's weights kept between picks)."""
