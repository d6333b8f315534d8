"""The advice an attempt gets, by role: memory, placement and priority, inputs, recording."""
