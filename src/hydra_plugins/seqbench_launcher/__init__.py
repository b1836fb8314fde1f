"""seqbench's Hydra launcher (process_launcher.py); Hydra instantiates launchers only from `hydra_plugins`."""
