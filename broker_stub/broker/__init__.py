"""The broker process: gRPC servicer, request handlers and the services behind them."""
