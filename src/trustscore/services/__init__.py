"""Services: the application's operations, composed from the pure core and the store."""
