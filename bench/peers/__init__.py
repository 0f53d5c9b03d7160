"""The peer benchmark: demuxlab's servers against the idiomatic libuv (``libuv_echo.c``) and tokio
(``tokio_echo/``) echo servers practitioners would write themselves."""
