# Loaded by warnings.ru's /load: a file whose loading takes 300 ms.
Holding.hold(300)
