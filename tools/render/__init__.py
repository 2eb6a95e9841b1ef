"""Human text for each result type (rich renderables); JSON is the models' own dump."""
