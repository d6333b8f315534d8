"""Pure policy: sizing strategies and their anchors, the decision, learning, grouping, labels, placement, priority, locality."""
