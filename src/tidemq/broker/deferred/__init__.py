"""Messages stored now and delivered later: DELAY messages when due (timer.py), TRANSACTION
messages once committed (transactions.py); both wait parked in a system topic (parking.py)."""
