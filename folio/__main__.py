from folio.cli import main

main()
