"""The pod adapters: the command wrapper, labels, live load, generated pods under the schema."""
