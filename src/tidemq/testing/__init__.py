"""Test support shipped with the package: the fault-injecting FileIO, the files a crash leaves."""
