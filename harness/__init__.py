"""harness: see DESIGN.md. Grows with the driver/client issues."""
