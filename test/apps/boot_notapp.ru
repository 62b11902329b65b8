# Not an app: run needs something that responds to call.
run 42
