"""Never finishes importing (waits on a network share, a lock, a prompt)."""
import time

time.sleep(3600)
